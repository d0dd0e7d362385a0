//! The store's embedder as a foreign-implemented trait (`Memory.setEmbedder`).

use std::sync::Arc;

use memstrata_bindings_common::Embedding;

use crate::EmbedderError;

/// Computes embeddings for the engine, implemented in Swift or Kotlin.
///
/// `embed` receives the texts to embed (one today: an episode's summary plus
/// its content's text, a knowledge entry's key plus its text, or a search
/// query) and returns one vector per text, in order, all of the context's
/// dimension. It is called on a worker thread with no engine lock held, so it
/// may block (on a model, on a network call) and may use the store.
#[uniffi::export(with_foreign)]
pub trait Embedder: Send + Sync {
    /// One embedding per text.
    fn embed(&self, texts: Vec<String>) -> Result<Vec<Embedding>, EmbedderError>;
}

/// A foreign [`Embedder`] as the core's embedder.
struct Foreign(Arc<dyn Embedder>);

impl memstrata::Embedder for Foreign {
    fn embed(&self, texts: &[&str]) -> memstrata::Result<Vec<Vec<f32>>> {
        let out = self
            .0
            .embed(texts.iter().map(|t| (*t).to_owned()).collect())
            .map_err(|e| {
                memstrata::Error::invalid("embedder", format!("the embedder failed: {e}"))
            })?;
        out.iter()
            .map(|v| memstrata_bindings_common::embedding_from_f64("embedder", &v.0))
            .collect()
    }
}

/// The core's embedder for a foreign one.
pub(crate) fn adapter(e: Arc<dyn Embedder>) -> Arc<dyn memstrata::Embedder> {
    Arc::new(Foreign(e))
}

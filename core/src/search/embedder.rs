//! The host's embedder hook and the checks every embedding passes.

use super::vector::MAX_EMBEDDING_DIM;
use crate::{Error, Result};

/// Computes embeddings for texts on behalf of the engine (see [`crate::Memory::set_embedder`]).
///
/// Returns one vector per text, in order. An error (or a panic) is reported to
/// the caller of the operation as `InvalidInput` on field `embedder`.
pub trait Embedder: Send + Sync {
    /// Embed `texts`.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

impl<F> Embedder for F
where
    F: Fn(&[&str]) -> Result<Vec<Vec<f32>>> + Send + Sync,
{
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self(texts)
    }
}

/// Call the embedder on one text, turning every failure (error, panic, wrong
/// count, bad vector) into `InvalidInput { field: "embedder" }`.
pub(crate) fn embed_one(embedder: &dyn Embedder, text: &str) -> Result<Vec<f32>> {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| embedder.embed(&[text])))
        .unwrap_or_else(|_| Err(Error::invalid("embedder", "the embedder panicked")));
    let mut out = match r {
        Ok(v) => v,
        Err(Error::InvalidInput { field, reason }) if field == "embedder" => {
            return Err(Error::invalid("embedder", reason));
        }
        Err(e) => return Err(Error::invalid("embedder", format!("embedder failed: {e}"))),
    };
    if out.len() != 1 {
        return Err(Error::invalid(
            "embedder",
            format!("returned {} vectors for 1 text", out.len()),
        ));
    }
    let v = out.pop().unwrap_or_default();
    check("embedder", &v)?;
    Ok(v)
}

/// The vectors of a batch write: the items without one get the registered
/// embedder's (one call for the whole batch, on `text` of each item), then
/// every vector of the batch must have one dimension (one per context): the
/// first that differs fails as `items[i].embedding`. Returns the first item
/// with a vector and its dimension (`None`: the batch has no vectors).
pub(crate) fn fill_batch<T>(
    items: &mut [T],
    embedder: Option<&dyn Embedder>,
    vector: impl Fn(&mut T) -> &mut Option<Vec<f32>>,
    text: impl Fn(&T) -> String,
) -> Result<Option<(usize, usize)>> {
    if let Some(f) = embedder {
        let missing: Vec<usize> = (0..items.len())
            .filter(|&i| vector(&mut items[i]).is_none())
            .collect();
        let texts: Vec<String> = missing.iter().map(|&i| text(&items[i])).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        for (i, v) in missing.into_iter().zip(embed_many(f, &refs)?) {
            *vector(&mut items[i]) = Some(v);
        }
    }
    let mut dim: Option<(usize, usize)> = None;
    for (i, item) in items.iter_mut().enumerate() {
        if let Some(v) = vector(item) {
            match dim {
                None => dim = Some((i, v.len())),
                Some((first, d)) if d != v.len() => {
                    return Err(Error::invalid(
                        format!("items[{i}].embedding"),
                        format!(
                            "embedding has {} dimensions, items[{first}].embedding has {d} (one dimension per context)",
                            v.len()
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
    }
    Ok(dim)
}

/// Call the embedder once on `texts` (a batch write), with the failures of
/// [`embed_one`]; a bad vector names its position (`vector 3: ...`).
pub(crate) fn embed_many(embedder: &dyn Embedder, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| embedder.embed(texts)))
        .unwrap_or_else(|_| Err(Error::invalid("embedder", "the embedder panicked")));
    let out = match r {
        Ok(v) => v,
        Err(Error::InvalidInput { field, reason }) if field == "embedder" => {
            return Err(Error::invalid("embedder", reason));
        }
        Err(e) => return Err(Error::invalid("embedder", format!("embedder failed: {e}"))),
    };
    if out.len() != texts.len() {
        return Err(Error::invalid(
            "embedder",
            format!("returned {} vectors for {} texts", out.len(), texts.len()),
        ));
    }
    for (i, v) in out.iter().enumerate() {
        check("embedder", v).map_err(|e| match e {
            Error::InvalidInput { reason, .. } => {
                Error::invalid("embedder", format!("vector {i}: {reason}"))
            }
            Error::LimitExceeded { .. } => Error::invalid(
                "embedder",
                format!("vector {i}: {} dimensions, more than allowed", v.len()),
            ),
            other => other,
        })?;
    }
    Ok(out)
}

/// Check an embedding: 1..=[`MAX_EMBEDDING_DIM`] finite numbers, not all zero.
pub(crate) fn check(field: &str, v: &[f32]) -> Result<()> {
    if v.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if v.len() > MAX_EMBEDDING_DIM {
        return Err(Error::limit(
            field,
            "embedding dimensions",
            MAX_EMBEDDING_DIM as u64,
            v.len() as u64,
        ));
    }
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        return Err(Error::invalid(
            field,
            format!("must hold finite numbers; element {i} is {}", v[i]),
        ));
    }
    if v.iter().all(|x| *x == 0.0) {
        return Err(Error::invalid(
            field,
            "must not be all zeros (cosine is undefined)",
        ));
    }
    Ok(())
}

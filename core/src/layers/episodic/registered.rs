//! What the episodic layer registers with the engine: the index document of an episode, the episodes as an indexed source (full scan, load, vector rows), and the per-engine episode cache.

#[allow(unused_imports)]
use super::*;

pub(crate) fn index_doc(ctx: &str, r: &EpisodeRecord) -> IndexDoc {
    let mut body = String::new();
    input::json_text(&r.content, &mut body);
    IndexDoc {
        uid: index::uid(Kind::Episode, ctx, &r.id),
        kind: Kind::Episode,
        ctx: ctx.to_owned(),
        summary: r.summary.clone(),
        body,
        participants: r.participants.clone(),
        tags: r.tags.clone(),
        ts_ms: r.timestamp,
        importance: u64::from(r.importance),
        embedding: vector::stored_to_index(r.embedding.as_ref()),
    }
}

/// Decoded episodes by sled key, one cache per engine (registered as layer state).
pub(crate) type EpisodeCache = DecodedCache<Episode>;

/// The episode cache of a new engine: none on a store shared by several
/// instances (a process-local cache cannot see other instances' writes).
pub(crate) fn new_cache(opts: &Options, shared: bool) -> Box<dyn Any + Send + Sync> {
    let bytes = if shared { 0 } else { opts.episode_cache_bytes };
    Box::new(EpisodeCache::new(bytes))
}

impl Weigh for Episode {
    fn approx_size(&self) -> usize {
        std::mem::size_of::<Episode>()
            + 64
            + self.id.len()
            + self.summary.len()
            + cache::value_size(&self.content)
            + self
                .participants
                .iter()
                .chain(&self.tags)
                .map(|s| s.len() + 24)
                .sum::<usize>()
    }
}

/// The episodes as an indexed source of the engine.
pub(crate) const SOURCE: IndexedSource = IndexedSource {
    kind: Kind::Episode,
    scan: scan_docs,
    load: load_doc,
    vectors: scan_vectors,
};

pub(super) fn scan_docs(e: &Engine, f: &mut dyn FnMut(IndexDoc) -> Result<()>) -> Result<()> {
    for item in e.t.episodes.iter() {
        let (k, v) = item?;
        let (ctx, _) = codec::split_ctx_key(&k)?;
        f(index_doc(&ctx, &e.codec.decode(&v)?))?;
    }
    Ok(())
}

/// What building a set needs of an episode record (`episodic::EpisodeRecord`;
/// the same field names, the others skipped by the decoder). Row metadata as
/// `episodic::index_doc` makes it.
#[derive(Deserialize)]
pub(super) struct VectorView {
    timestamp: i64,
    participants: Vec<String>,
    tags: Vec<String>,
    importance: u8,
    #[serde(default)]
    embedding: Option<VecBytes>,
}

pub(super) fn scan_vectors(
    e: &Engine,
    ctx: &str,
    f: &mut dyn FnMut(&str, &[f32], RowMeta),
) -> Result<()> {
    for item in e.t.episodes.scan_prefix(codec::ctx_prefix(ctx)) {
        let (k, v) = item?;
        let (_, key) = codec::split_ctx_key(&k)?;
        // Only the fields the set needs are decoded: the summary and content
        // are skipped, not built (and their text not extracted).
        let r: VectorView = e.codec.decode(&v)?;
        if let Some(emb) = vector::stored_to_index(r.embedding.as_ref()) {
            let meta = RowMeta {
                ts_ms: r.timestamp,
                importance: u64::from(r.importance),
                tags: r.tags.into_boxed_slice(),
                participants: r.participants.into_boxed_slice(),
            };
            f(&key, &emb, meta);
        }
    }
    Ok(())
}

pub(super) fn load_doc(e: &Engine, ctx: &str, id: &str) -> Result<Option<IndexDoc>> {
    Ok(match e.t.episodes.get(codec::ctx_key(ctx, id))? {
        Some(v) => Some(index_doc(ctx, &e.codec.decode(&v)?)),
        None => None,
    })
}

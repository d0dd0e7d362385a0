//! What the episodic layer registers with the engine: the index document of an episode, the episodes as an indexed source (full scan, load, vector rows), and the per-engine episode cache.

#[allow(unused_imports)]
use super::*;

/// The index document of an episode no longer needed: its texts move into the document.
pub(crate) fn index_doc_of(ctx: &str, mut r: EpisodeRecord) -> IndexDoc {
    let text = TextFields {
        summary: std::mem::take(&mut r.summary),
        participants: std::mem::take(&mut r.participants),
        tags: std::mem::take(&mut r.tags),
    };
    build_doc(ctx, &r, text)
}

/// The index document of an episode, its text fields copied.
pub(crate) fn index_doc(ctx: &str, r: &EpisodeRecord) -> IndexDoc {
    let text = TextFields {
        summary: r.summary.clone(),
        participants: r.participants.clone(),
        tags: r.tags.clone(),
    };
    build_doc(ctx, r, text)
}

/// The fields an index document owns (moved out of the record, or copied).
struct TextFields {
    summary: String,
    participants: Vec<String>,
    tags: Vec<String>,
}

fn build_doc(ctx: &str, r: &EpisodeRecord, text: TextFields) -> IndexDoc {
    let mut body = String::new();
    input::json_text(&r.content, &mut body);
    IndexDoc {
        uid: index::uid(Kind::Episode, ctx, &r.id),
        kind: Kind::Episode,
        ctx: ctx.to_owned(),
        summary: text.summary,
        body,
        participants: text.participants,
        tags: text.tags,
        ts_ms: r.timestamp,
        importance: u64::from(r.importance),
        embedding: vector::stored_to_index(r.embedding.as_ref()),
        fresh: false,
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
        let (ctx, id) = codec::split_ctx_key(&k)?;
        f(index_doc(&ctx, &EpisodeRecord::decode(&e.codec, &id, &v)?))?;
    }
    Ok(())
}

/// What building a set needs of a stored episode (`stored.rs`): the same
/// fields in the same order as format version 2 writes them, the unneeded
/// ones skipped by the decoder (`IgnoredAny`), so both the arrays of version
/// 2 and the named maps of version 1 (whose `id` is ignored) decode. Row
/// metadata as `episodic::index_doc` makes it.
#[derive(Deserialize)]
pub(super) struct VectorView {
    timestamp: i64,
    #[serde(default, rename = "summary")]
    _summary: serde::de::IgnoredAny,
    #[serde(default, rename = "content")]
    _content: serde::de::IgnoredAny,
    participants: Vec<String>,
    tags: Vec<String>,
    importance: u8,
    #[serde(default)]
    embedding: Option<VecBytes>,
    // Fields appended by duplicate detection (merged and linked episodes):
    // skipped, so that the array's length matches.
    #[serde(default, rename = "seen_count")]
    _seen_count: serde::de::IgnoredAny,
    #[serde(default, rename = "last_seen")]
    _last_seen: serde::de::IgnoredAny,
    #[serde(default, rename = "duplicate_of")]
    _duplicate_of: serde::de::IgnoredAny,
    // Appended for as-of reads (an episode recorded at another time than its
    // timestamp): skipped too.
    #[serde(default, rename = "recorded_at")]
    _recorded_at: serde::de::IgnoredAny,
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
        Some(v) => Some(index_doc(ctx, &EpisodeRecord::decode(&e.codec, id, &v)?)),
        None => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector view reads both record layouts: the arrays written now and
    /// the named maps of format version 1.
    #[test]
    fn vector_view_reads_array_and_map_records() {
        let rec = EpisodeRecord {
            id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".into(),
            timestamp: 1_700_000_000_123,
            summary: "a summary the view skips".into(),
            content: serde_json::json!({"skipped": [1, 2, 3]}),
            participants: vec!["alice".into()],
            tags: vec!["deploy".into(), "prod".into()],
            importance: 7,
            embedding: Some(VecBytes::from_f32(&[0.5, -0.25, 1.0])),
            seen_count: 1,
            last_seen: None,
            duplicate_of: None,
            recorded_at: None,
        };
        let plain = codec::Codec::default();
        let array = rec.encode(&plain).unwrap();
        let map = codec::encode(&rec).unwrap();
        assert!(matches!(array[1], 0x90..=0x9f), "array: {:x?}", &array[..2]);
        assert!(matches!(map[1], 0x80..=0x8f), "map: {:x?}", &map[..2]);
        assert!(array.len() < map.len());
        for bytes in [&array, &map] {
            let v: VectorView = codec::decode(bytes).unwrap();
            assert_eq!(v.timestamp, rec.timestamp);
            assert_eq!(v.participants, rec.participants);
            assert_eq!(v.tags, rec.tags);
            assert_eq!(v.importance, 7);
            assert_eq!(
                vector::stored_to_index(v.embedding.as_ref()),
                vector::stored_to_index(rec.embedding.as_ref())
            );
            // The id comes from the key for an array, from the map for a map.
            let full = EpisodeRecord::decode(&plain, &rec.id, bytes).unwrap();
            assert_eq!(full.id, rec.id);
            assert_eq!(full.timestamp, rec.timestamp);
            assert_eq!(full.participants, rec.participants);
            assert_eq!(full.summary, rec.summary);
            assert_eq!(full.content, rec.content);
        }
        // A record recorded at another time than its timestamp: every
        // appended field is in the array, and the view still reads it.
        let backdated = EpisodeRecord {
            recorded_at: Some(rec.timestamp + 60_000),
            ..rec.clone()
        };
        let bytes = backdated.encode(&plain).unwrap();
        let v: VectorView = codec::decode(&bytes).unwrap();
        assert_eq!(v.timestamp, rec.timestamp);
        let full = EpisodeRecord::decode(&plain, &rec.id, &bytes).unwrap();
        assert_eq!(full.recorded_at, backdated.recorded_at);
        // A record without an embedding: the trailing field is left out of the array.
        let no_vec = EpisodeRecord {
            embedding: None,
            ..rec
        };
        let bytes = no_vec.encode(&plain).unwrap();
        let v: VectorView = codec::decode(&bytes).unwrap();
        assert!(v.embedding.is_none());
        assert!(
            EpisodeRecord::decode(&plain, &no_vec.id, &bytes)
                .unwrap()
                .embedding
                .is_none()
        );
    }
}

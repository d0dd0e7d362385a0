//! The stored form of an episode. Format version 2 writes [`EpisodeRecord`]
//! without its id (the id is the key's) as a MessagePack array, fields by
//! position; format version 1 wrote the whole record as a map with field
//! names. [`EpisodeRecord::decode`] reads both. Fields appended since
//! (`seen_count`, `last_seen`, `duplicate_of`: duplicate detection;
//! `recorded_at`: as-of reads) are written only when they differ from their
//! defaults.

#[allow(unused_imports)]
use super::*;

/// What format version 2 writes (borrowed from an [`EpisodeRecord`]). The
/// field order is part of the format: fields are only ever appended, each
/// one `#[serde(default)]` in [`StoredEpisode`].
#[derive(Serialize)]
struct StoredEpisodeRef<'a> {
    timestamp: i64,
    summary: &'a str,
    content: &'a Value,
    participants: &'a [String],
    tags: &'a [String],
    importance: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    embedding: Option<&'a VecBytes>,
}

/// What format version 2 writes for a record with duplicate-detection fields
/// (a merged or linked episode): [`StoredEpisodeRef`]'s fields, the embedding
/// always present (nil when none, so the positions after it hold), then the
/// appended ones.
#[derive(Serialize)]
struct StoredEpisodeExtRef<'a> {
    timestamp: i64,
    summary: &'a str,
    content: &'a Value,
    participants: &'a [String],
    tags: &'a [String],
    importance: u8,
    embedding: Option<&'a VecBytes>,
    seen_count: u32,
    last_seen: Option<i64>,
    duplicate_of: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recorded_at: Option<i64>,
}

/// What format version 2 reads back.
#[derive(Deserialize)]
struct StoredEpisode {
    timestamp: i64,
    summary: String,
    content: Value,
    participants: Vec<String>,
    tags: Vec<String>,
    importance: u8,
    #[serde(default)]
    embedding: Option<VecBytes>,
    #[serde(default = "one")]
    seen_count: u32,
    #[serde(default)]
    last_seen: Option<i64>,
    #[serde(default)]
    duplicate_of: Option<String>,
    #[serde(default)]
    recorded_at: Option<i64>,
}

fn one() -> u32 {
    1
}

impl EpisodeRecord {
    /// The stored bytes of this record: an array of every field but the id.
    pub(crate) fn encode(&self, codec: &codec::Codec) -> Result<Vec<u8>> {
        if self.seen_count != 1
            || self.last_seen.is_some()
            || self.duplicate_of.is_some()
            || self.recorded_at.is_some()
        {
            return codec.encode_compact(&StoredEpisodeExtRef {
                timestamp: self.timestamp,
                summary: &self.summary,
                content: &self.content,
                participants: &self.participants,
                tags: &self.tags,
                importance: self.importance,
                embedding: self.embedding.as_ref(),
                seen_count: self.seen_count,
                last_seen: self.last_seen,
                duplicate_of: self.duplicate_of.as_deref(),
                recorded_at: self.recorded_at,
            });
        }
        codec.encode_compact(&StoredEpisodeRef {
            timestamp: self.timestamp,
            summary: &self.summary,
            content: &self.content,
            participants: &self.participants,
            tags: &self.tags,
            importance: self.importance,
            embedding: self.embedding.as_ref(),
        })
    }

    /// The record stored as `bytes` under the episode id `id` (the key's):
    /// an array of format version 2, or a named map of version 1 (which
    /// carries its own id).
    pub(crate) fn decode(codec: &codec::Codec, id: &str, bytes: &[u8]) -> Result<Self> {
        let raw = codec.inner(bytes)?;
        if raw.first().is_some_and(|b| codec::is_msgpack_map(*b)) {
            return codec::from_msgpack(&raw);
        }
        let s: StoredEpisode = codec::from_msgpack(&raw)?;
        Ok(EpisodeRecord {
            id: id.to_owned(),
            timestamp: s.timestamp,
            summary: s.summary,
            content: s.content,
            participants: s.participants,
            tags: s.tags,
            importance: s.importance,
            embedding: s.embedding,
            seen_count: s.seen_count,
            last_seen: s.last_seen,
            duplicate_of: s.duplicate_of,
            recorded_at: s.recorded_at,
        })
    }

    /// [`EpisodeRecord::decode`] of the record stored under the sled key `key` (`ctx\0id`).
    pub(crate) fn decode_keyed(codec: &codec::Codec, key: &[u8], bytes: &[u8]) -> Result<Self> {
        let (_, id) = codec::split_ctx_key(key)?;
        Self::decode(codec, &id, bytes)
    }
}

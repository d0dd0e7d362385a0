//! The stored form of an episode. Format version 2 writes [`EpisodeRecord`]
//! without its id (the id is the key's) as a MessagePack array, fields by
//! position; format version 1 wrote the whole record as a map with field
//! names. [`EpisodeRecord::decode`] reads both.

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
}

impl EpisodeRecord {
    /// The stored bytes of this record: an array of every field but the id.
    pub(crate) fn encode(&self, codec: &codec::Codec) -> Result<Vec<u8>> {
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
        })
    }

    /// [`EpisodeRecord::decode`] of the record stored under the sled key `key` (`ctx\0id`).
    pub(crate) fn decode_keyed(codec: &codec::Codec, key: &[u8], bytes: &[u8]) -> Result<Self> {
        let (_, id) = codec::split_ctx_key(key)?;
        Self::decode(codec, &id, bytes)
    }
}

//! Sessions: named, versioned snapshots of an agent's state (engine-wide, not per context).
//!
//! Versions are numbered 1, 2, 3… per session and stored one record each in
//! the `session_versions` tree at one of four compression levels (see
//! `docs/sessions.md` for the byte layout and measured figures):
//!
//! | level | payload |
//! |---|---|
//! | 0 | canonical MessagePack, uncompressed |
//! | 1 | lz4_flex block of the canonical MessagePack |
//! | 2 | stream-split transform (structure / keys / numbers / text, interned) + lz4_flex + Huffman |
//! | 3 | copy/insert delta against the previous version (lz4_flex + Huffman), or a level-2 keyframe when the delta is not smaller or the delta chain is 16 deep |
//!
//! Every version restores exactly: deltas carry the checksum of the content
//! they rebuild, and pruning (`optimize`) re-bases any kept version whose base
//! it removes, in the same transaction.

use crate::engine::Scope;
use crate::storage::{Bytes, TxError};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::clock::millis_to_dt;
use crate::continuity::session_codec::{self as sc, Reader};
use crate::engine::Engine;
use crate::{Error, Result, util::input};

mod versions;
#[allow(unused_imports)]
pub(crate) use versions::*;

mod lifecycle;
#[allow(unused_imports)]
pub(crate) use lifecycle::*;

/// Highest compression level.
pub const MAX_COMPRESSION_LEVEL: u8 = 3;

/// Longest chain of deltas a level-3 version may sit on before a keyframe is forced.
pub(crate) const MAX_DELTA_CHAIN: u32 = 16;

/// Result of [`Sessions::create`](crate::Sessions::create).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SessionCreated {
    /// UUIDv7 id of the new session.
    pub session_id: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// Result of [`Sessions::save`](crate::Sessions::save).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SessionSaved {
    /// The new version number (1, 2, 3… per session).
    pub version: u64,
    /// When it was saved.
    pub saved_at: DateTime<Utc>,
}

/// Result of [`Sessions::restore`](crate::Sessions::restore).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SessionRestored {
    /// The saved content, exactly as saved.
    pub content: Value,
    /// The session's metadata (from `session_create`).
    pub metadata: Value,
    /// The version restored.
    pub version: u64,
}

/// One session, as listed by [`Sessions::list`](crate::Sessions::list).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SessionInfo {
    /// Session id.
    pub session_id: String,
    /// Name given at creation.
    pub name: String,
    /// Metadata given at creation.
    pub metadata: Value,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last save (or creation).
    pub updated_at: DateTime<Utc>,
    /// Newest stored version, `None` before the first save.
    pub latest_version: Option<u64>,
    /// Versions currently stored (older ones may have been pruned by `optimize`).
    pub version_count: u64,
}

/// One stored version, as listed by [`Sessions::versions`](crate::Sessions::versions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SessionVersionInfo {
    /// Version number.
    pub version: u64,
    /// When it was saved.
    pub saved_at: DateTime<Utc>,
    /// Level it was saved at (0..=3).
    pub compression_level: u8,
    /// Size of the content as canonical MessagePack.
    pub raw_bytes: u64,
    /// Size of the stored record (payload plus a small header).
    pub stored_bytes: u64,
}

/// Session header in the `sessions` tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SessionRecord {
    pub name: String,
    pub metadata: Value,
    pub created_at: i64,
    pub updated_at: i64,
    /// Highest version ever assigned (versions are never reused).
    pub last_version: u64,
}

pub(crate) fn load_session(e: &Engine, sid: &str) -> Result<Option<SessionRecord>> {
    Ok(match e.t.sessions.get(sid.as_bytes())? {
        Some(v) => Some(e.codec.decode(&v)?),
        None => None,
    })
}

fn require_session(e: &Engine, sid: &str) -> Result<SessionRecord> {
    input::key(&e.opts.limits, "session_id", sid)?;
    load_session(e, sid)?.ok_or_else(|| Error::not_found(format!("session {sid:?}")))
}

fn latest_version(e: &Engine, sid: &str) -> Result<Option<u64>> {
    match e
        .t
        .session_versions
        .scan_prefix(version_prefix(sid))
        .keys()
        .next_back()
    {
        Some(k) => Ok(Some(version_of_key(&k?)?)),
        None => Ok(None),
    }
}

fn range_text(versions: &[u64]) -> String {
    match (versions.first(), versions.last()) {
        (Some(a), Some(b)) if a == b => format!("only version {a} is stored"),
        (Some(a), Some(b)) => format!("stored versions: {a}..={b}"),
        _ => "it has no saved versions".to_owned(),
    }
}

fn session_id_string(k: &[u8]) -> Result<String> {
    String::from_utf8(k.to_vec()).map_err(|_| Error::corrupted("non-UTF-8 session id"))
}

/// Every session header, in id (= creation) order.
pub(crate) fn all_sessions(e: &Engine) -> Result<Vec<(String, SessionRecord)>> {
    let mut out = Vec::new();
    for item in e.t.sessions.iter() {
        let (k, v) = item?;
        out.push((session_id_string(&k)?, e.codec.decode(&v)?));
    }
    Ok(out)
}

/// Handle on the sessions of a store (snapshots of a context). Get it from [`Memory::sessions`](crate::Memory::sessions).
#[derive(Debug, Clone)]
pub struct Sessions {
    pub(crate) scope: Scope,
}

impl Sessions {
    /// Create a session; returns its id. `metadata` is any JSON (returned by every restore).
    pub fn create(&self, name: &str, metadata: Value) -> Result<SessionCreated> {
        let e = &self.scope.engine;
        e.timed("session.create", || {
            input::key(&e.opts.limits, "name", name)?;
            input::value(&e.opts.limits, "metadata", &metadata)?;
            let now = e.opts.clock.now().timestamp_millis();
            let id = uuid::Uuid::now_v7().to_string();
            let rec = SessionRecord {
                name: name.to_owned(),
                metadata,
                created_at: now,
                updated_at: now,
                last_version: 0,
            };
            e.t.sessions.insert(id.as_bytes(), e.codec.encode(&rec)?)?;
            e.after_write()?;
            Ok(SessionCreated {
                session_id: id,
                created_at: millis_to_dt(now),
            })
        })
    }

    /// Save `content` as the next version of a session at `compression_level` 0..=3.
    pub fn save(
        &self,
        session_id: &str,
        content: Value,
        compression_level: u8,
    ) -> Result<SessionSaved> {
        let e = &self.scope.engine;
        e.timed("session.save", || {
            if compression_level > MAX_COMPRESSION_LEVEL {
                return Err(Error::invalid(
                    "compression_level",
                    format!("must be in 0..={MAX_COMPRESSION_LEVEL}, got {compression_level}"),
                ));
            }
            input::key(&e.opts.limits, "session_id", session_id)?;
            input::value(&e.opts.limits, "content", &content)?;
            let canon = sc::canonical(&content)?;
            let _g = e.rmw_lock()?;
            let mut rec = require_session(e, session_id)?;
            let base = match (compression_level, latest_version(e, session_id)?) {
                (3, Some(pv)) => match load(e, session_id, pv)? {
                    Some((body, h)) => {
                        let c =
                            body.into_canon(&h, &|| format!("session {session_id} version {pv}"))?;
                        Some((pv, h.depth, c))
                    }
                    None => None,
                },
                _ => None,
            };
            let now = e.opts.clock.now().timestamp_millis();
            let version = rec.last_version + 1;
            let prev = base.as_ref().map(|(v, d, c)| Prev {
                version: *v,
                depth: *d,
                canon: c,
            });
            let enc = encode_version(compression_level, &content, &canon, now, prev)?;
            rec.last_version = version;
            rec.updated_at = now;
            let header = e.codec.encode(&rec)?;
            let vkey = version_key(session_id, version);
            let record = e.codec.seal(enc.record)?;
            e.store()
                .transaction(&[&e.t.sessions, &e.t.session_versions], |t| {
                    let (s, v) = (&t[0], &t[1]);
                    v.insert(vkey.as_slice(), record.as_slice())?;
                    s.insert(session_id.as_bytes(), header.as_slice())?;
                    Ok::<_, TxError>(())
                })?;
            e.after_write()?;
            Ok(SessionSaved {
                version,
                saved_at: millis_to_dt(now),
            })
        })
    }

    /// Restore a version of a session (the latest when `version` is `None`).
    ///
    /// `NotFound` names the session, or the version and the stored range.
    pub fn restore(&self, session_id: &str, version: Option<u64>) -> Result<SessionRestored> {
        let e = &self.scope.engine;
        e.timed("session.restore", || {
            let rec = require_session(e, session_id)?;
            let mut attempts = 0;
            let (v, loaded) = loop {
                let v = match version {
                    Some(v) => v,
                    None => latest_version(e, session_id)?.ok_or_else(|| {
                        Error::not_found(format!(
                            "saved version of session {session_id:?}: it has no saved versions"
                        ))
                    })?,
                };
                let loaded = load(e, session_id, v)?;
                // The newest version can be pruned between finding it and reading it only if
                // newer ones were saved meanwhile: look again.
                attempts += 1;
                if loaded.is_some() || version.is_some() || attempts >= 4 {
                    break (v, loaded);
                }
            };
            match loaded {
                Some((body, _)) => Ok(SessionRestored {
                    content: body.into_value()?,
                    metadata: rec.metadata,
                    version: v,
                }),
                None => {
                    let stored: Vec<u64> = version_headers(e, session_id)?
                        .into_iter()
                        .map(|(v, _, _)| v)
                        .collect();
                    Err(Error::not_found(format!(
                        "version {v} of session {session_id:?} ({})",
                        range_text(&stored)
                    )))
                }
            }
        })
    }

    /// Every session, oldest first.
    pub fn list(&self) -> Result<Vec<SessionInfo>> {
        let e = &self.scope.engine;
        e.timed("session.list", || {
            let mut out = Vec::new();
            for (sid, rec) in all_sessions(e)? {
                let mut count = 0u64;
                let mut latest = None;
                for k in
                    e.t.session_versions
                        .scan_prefix(version_prefix(&sid))
                        .keys()
                {
                    latest = Some(version_of_key(&k?)?);
                    count += 1;
                }
                out.push(SessionInfo {
                    session_id: sid,
                    name: rec.name,
                    metadata: rec.metadata,
                    created_at: millis_to_dt(rec.created_at),
                    updated_at: millis_to_dt(rec.updated_at),
                    latest_version: latest,
                    version_count: count,
                });
            }
            Ok(out)
        })
    }

    /// Stored versions of a session, oldest first (`NotFound` for an unknown session).
    pub fn versions(&self, session_id: &str) -> Result<Vec<SessionVersionInfo>> {
        let e = &self.scope.engine;
        e.timed("session.versions", || {
            require_session(e, session_id)?;
            Ok(version_headers(e, session_id)?
                .into_iter()
                .map(|(v, h, n)| SessionVersionInfo {
                    version: v,
                    saved_at: millis_to_dt(h.saved_at),
                    compression_level: h.level,
                    raw_bytes: h.raw_bytes,
                    stored_bytes: n as u64,
                })
                .collect())
        })
    }

    /// Delete a session and all its versions; `true` when it existed.
    pub fn delete(&self, session_id: &str) -> Result<bool> {
        let e = &self.scope.engine;
        e.timed("session.delete", || {
            input::key(&e.opts.limits, "session_id", session_id)?;
            let _g = e.rmw_lock()?;
            let keys: Vec<Bytes> =
                e.t.session_versions
                    .scan_prefix(version_prefix(session_id))
                    .keys()
                    .collect::<Result<_, _>>()?;
            let existed = e
                .store()
                .transaction(&[&e.t.sessions, &e.t.session_versions], |t| {
                    let (s, v) = (&t[0], &t[1]);
                    for k in &keys {
                        v.remove(k)?;
                    }
                    Ok::<_, TxError>(s.remove(session_id.as_bytes())?.is_some())
                })?;
            e.after_write()?;
            Ok(existed)
        })
    }
}

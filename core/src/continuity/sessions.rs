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

use crate::continuity::session_codec::{self as sc, Reader};
use crate::engine::Engine;
use crate::util::clock::millis_to_dt;
use crate::{Error, Result, util::input};

/// Highest compression level.
pub const MAX_COMPRESSION_LEVEL: u8 = 3;

/// Longest chain of deltas a level-3 version may sit on before a keyframe is forced.
pub(crate) const MAX_DELTA_CHAIN: u32 = 16;

/// First byte of every `session_versions` value (record layout 1).
const RECORD_TAG: u8 = 0xA1;

const ENC_RAW: u8 = 0;
const ENC_LZ4: u8 = 1;
const ENC_SPLIT: u8 = 2;
const ENC_DELTA: u8 = 3;

/// Result of [`Memory::session_create`](crate::Memory::session_create).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionCreated {
    /// UUIDv7 id of the new session.
    pub session_id: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// Result of [`Memory::session_save`](crate::Memory::session_save).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionSaved {
    /// Always true when returned.
    pub success: bool,
    /// The new version number (1, 2, 3… per session).
    pub version: u64,
    /// When it was saved.
    pub saved_at: DateTime<Utc>,
}

/// Result of [`Memory::session_restore`](crate::Memory::session_restore).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionRestored {
    /// Always true when returned.
    pub success: bool,
    /// The saved content, exactly as saved.
    pub content: Value,
    /// The session's metadata (from `session_create`).
    pub metadata: Value,
    /// The version restored.
    pub version: u64,
}

/// One session, as listed by [`Memory::session_list`](crate::Memory::session_list).
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// One stored version, as listed by [`Memory::session_versions`](crate::Memory::session_versions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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

/// Header of a `session_versions` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct VersionHeader {
    pub saved_at: i64,
    /// Level requested by the caller.
    pub level: u8,
    /// How the payload is encoded (`ENC_*`).
    pub encoding: u8,
    /// Version the delta applies to (`ENC_DELTA` only).
    pub base: Option<u64>,
    /// Deltas between this version and its keyframe (0 for a keyframe).
    pub depth: u32,
    /// Length of the canonical MessagePack content.
    pub raw_bytes: u64,
    /// `session_codec::checksum` of the canonical MessagePack content.
    pub checksum: u64,
}

/// A version's content as it comes out of storage.
enum Body {
    Canon(Vec<u8>),
    Value(Value),
}

impl Body {
    fn into_value(self) -> Result<Value> {
        match self {
            Body::Canon(b) => sc::from_canonical(&b),
            Body::Value(v) => Ok(v),
        }
    }

    fn into_canon(self, h: &VersionHeader, what: &dyn Fn() -> String) -> Result<Vec<u8>> {
        let b = match self {
            Body::Canon(b) => b,
            Body::Value(v) => sc::canonical(&v)?,
        };
        verify(&b, h, what)?;
        Ok(b)
    }
}

fn verify(canon: &[u8], h: &VersionHeader, what: &dyn Fn() -> String) -> Result<()> {
    if canon.len() as u64 != h.raw_bytes || sc::checksum(canon) != h.checksum {
        return Err(Error::corrupted(format!(
            "{}: content does not match its checksum",
            what()
        )));
    }
    Ok(())
}

pub(crate) fn version_key(sid: &str, version: u64) -> Vec<u8> {
    let mut k = version_prefix(sid);
    k.extend_from_slice(&version.to_be_bytes());
    k
}

fn version_prefix(sid: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(sid.len() + 9);
    k.extend_from_slice(sid.as_bytes());
    k.push(0);
    k
}

fn version_of_key(k: &[u8]) -> Result<u64> {
    k.len()
        .checked_sub(8)
        .and_then(|p| k[p..].try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| Error::corrupted("bad session_versions key"))
}

fn encode_record(h: &VersionHeader, payload: &[u8]) -> Result<Vec<u8>> {
    let hb = rmp_serde::to_vec_named(h)?;
    let mut out = Vec::with_capacity(hb.len() + payload.len() + 4);
    out.push(RECORD_TAG);
    sc::put_varint(&mut out, hb.len() as u64);
    out.extend_from_slice(&hb);
    out.extend_from_slice(payload);
    Ok(out)
}

pub(crate) fn decode_record(bytes: &[u8]) -> Result<(VersionHeader, &[u8])> {
    let mut r = Reader::new(bytes, "session version record");
    let tag = r.u8()?;
    if tag != RECORD_TAG {
        return Err(Error::corrupted(format!(
            "session version record has layout tag {tag:#x}, expected {RECORD_TAG:#x} (written by a newer memstrata?)"
        )));
    }
    let n = r.len()?;
    let h: VersionHeader = rmp_serde::from_slice(r.bytes(n)?)?;
    if h.level > MAX_COMPRESSION_LEVEL || h.encoding > ENC_DELTA {
        return Err(Error::corrupted(format!(
            "session version record with level {} / encoding {}",
            h.level, h.encoding
        )));
    }
    Ok((h, r.rest()))
}

/// Upper bound of any intermediate buffer for a version of `raw_bytes`.
fn max_len(raw_bytes: u64) -> usize {
    usize::try_from(raw_bytes)
        .unwrap_or(usize::MAX)
        .saturating_mul(3)
        .saturating_add(1024)
}

/// Decode a keyframe (non-delta) payload.
fn keyframe_body(h: &VersionHeader, payload: &[u8], max_depth: usize) -> Result<Body> {
    let raw = usize::try_from(h.raw_bytes).unwrap_or(usize::MAX);
    Ok(match h.encoding {
        ENC_RAW => Body::Canon(payload.to_vec()),
        ENC_LZ4 => Body::Canon(sc::unlz4(payload, raw, "session level-1 payload")?),
        ENC_SPLIT => Body::Value(sc::split_decode(payload, max_len(h.raw_bytes), max_depth)?),
        e => {
            return Err(Error::corrupted(format!(
                "session keyframe with encoding {e}"
            )));
        }
    })
}

/// An encoded version ready to store.
pub(crate) struct Encoded {
    pub header: VersionHeader,
    pub record: Vec<u8>,
}

/// The previous version a level-3 save may delta against.
pub(crate) struct Prev<'a> {
    pub version: u64,
    pub depth: u32,
    pub canon: &'a [u8],
}

/// Encode `content` (whose canonical bytes are `canon`) at `level`.
pub(crate) fn encode_version(
    level: u8,
    content: &Value,
    canon: &[u8],
    saved_at: i64,
    prev: Option<Prev<'_>>,
) -> Result<Encoded> {
    let (encoding, base, depth, payload) = match level {
        0 => (ENC_RAW, None, 0, canon.to_vec()),
        1 => (ENC_LZ4, None, 0, sc::lz4(canon)),
        2 => (ENC_SPLIT, None, 0, sc::split_encode(content)),
        _ => {
            let full = sc::split_encode(content);
            match prev {
                Some(p) if p.depth < MAX_DELTA_CHAIN => {
                    let d = sc::pack(&sc::delta_encode(p.canon, canon));
                    if d.len() < full.len() {
                        (ENC_DELTA, Some(p.version), p.depth + 1, d)
                    } else {
                        (ENC_SPLIT, None, 0, full)
                    }
                }
                _ => (ENC_SPLIT, None, 0, full),
            }
        }
    };
    let header = VersionHeader {
        saved_at,
        level,
        encoding,
        base,
        depth,
        raw_bytes: canon.len() as u64,
        checksum: sc::checksum(canon),
    };
    let record = encode_record(&header, &payload)?;
    Ok(Encoded { header, record })
}

enum Load {
    Missing,
    BaseMissing,
    Found(Body, VersionHeader),
}

/// Read `version` and the chain of delta bases under it.
fn try_load(e: &Engine, sid: &str, version: u64) -> Result<Load> {
    // Decoding guard only: content was depth-checked when saved (a lowered limit must not break restores).
    let max_depth = e.opts.limits.max_json_depth.max(256);
    let mut chain: Vec<(u64, VersionHeader, Bytes)> = Vec::new();
    let mut cur = version;
    loop {
        let Some(raw) = e.t.session_versions.get(version_key(sid, cur))? else {
            return Ok(if chain.is_empty() {
                Load::Missing
            } else {
                Load::BaseMissing
            });
        };
        let raw = e.codec.open_ivec(raw)?;
        let (h, _) = decode_record(&raw)?;
        let base = h.base;
        if (h.encoding == ENC_DELTA) != base.is_some() {
            return Err(Error::corrupted(format!(
                "session {sid} version {cur}: delta without base or base without delta"
            )));
        }
        chain.push((cur, h, raw));
        match base {
            None => break,
            Some(b) if b < cur && chain.len() <= MAX_DELTA_CHAIN as usize * 4 => cur = b,
            Some(b) => {
                return Err(Error::corrupted(format!(
                    "session {sid} version {cur}: invalid delta base {b}"
                )));
            }
        }
    }
    let Some((kv, kh, kraw)) = chain.pop() else {
        return Ok(Load::Missing);
    };
    let (_, payload) = decode_record(&kraw)?;
    let mut body = keyframe_body(&kh, payload, max_depth)?;
    let mut header = kh;
    let mut at = kv;
    if let Body::Canon(b) = &body {
        verify(b, &header, &|| format!("session {sid} version {at}"))?;
    }
    while let Some((v, h, raw)) = chain.pop() {
        let base = body.into_canon(&header, &|| format!("session {sid} version {at}"))?;
        let (_, payload) = decode_record(&raw)?;
        let delta = sc::unpack(payload, max_len(h.raw_bytes), "session delta")?;
        let canon = sc::delta_apply(
            &base,
            &delta,
            usize::try_from(h.raw_bytes).unwrap_or(usize::MAX),
        )?;
        verify(&canon, &h, &|| format!("session {sid} version {v}"))?;
        body = Body::Canon(canon);
        header = h;
        at = v;
    }
    Ok(Load::Found(body, header))
}

/// Load a version, retrying when a concurrent prune removed a base between reads
/// (a prune re-bases and deletes in one transaction, so a fresh read is consistent).
fn load(e: &Engine, sid: &str, version: u64) -> Result<Option<(Body, VersionHeader)>> {
    for _ in 0..4 {
        match try_load(e, sid, version)? {
            Load::Missing => return Ok(None),
            Load::BaseMissing => continue,
            Load::Found(b, h) => return Ok(Some((b, h))),
        }
    }
    Err(Error::corrupted(format!(
        "session {sid} version {version}: the version it is a delta of is missing"
    )))
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

/// (version, header, stored record length) of every stored version, oldest first.
pub(crate) fn version_headers(e: &Engine, sid: &str) -> Result<Vec<(u64, VersionHeader, usize)>> {
    let mut out = Vec::new();
    for item in e.t.session_versions.scan_prefix(version_prefix(sid)) {
        let (k, v) = item?;
        let (h, _) = decode_record(&e.codec.open(&v)?)?;
        out.push((version_of_key(&k)?, h, v.len()));
    }
    Ok(out)
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

/// Canonical bytes of every stored version of `sid`, oldest first (one pass, reusing each
/// version as the base of the next). Caller holds `rmw` for a consistent view.
pub(crate) fn materialize_all(e: &Engine, sid: &str) -> Result<Vec<(u64, VersionHeader, Vec<u8>)>> {
    // Decoding guard only: content was depth-checked when saved (a lowered limit must not break restores).
    let max_depth = e.opts.limits.max_json_depth.max(256);
    let mut out: Vec<(u64, VersionHeader, Vec<u8>)> = Vec::new();
    for item in e.t.session_versions.scan_prefix(version_prefix(sid)) {
        let (k, raw) = item?;
        let v = version_of_key(&k)?;
        let raw = e.codec.open_ivec(raw)?;
        let (h, payload) = decode_record(&raw)?;
        let what = || format!("session {sid} version {v}");
        let canon = match (h.base, out.last()) {
            (None, _) => keyframe_body(&h, payload, max_depth)?.into_canon(&h, &what)?,
            (Some(b), Some((pv, _, pcanon))) if b == *pv => {
                let delta = sc::unpack(payload, max_len(h.raw_bytes), "session delta")?;
                let c = sc::delta_apply(
                    pcanon,
                    &delta,
                    usize::try_from(h.raw_bytes).unwrap_or(usize::MAX),
                )?;
                verify(&c, &h, &what)?;
                c
            }
            (Some(_), _) => match load(e, sid, v)? {
                Some((body, hh)) => body.into_canon(&hh, &what)?,
                None => {
                    return Err(Error::corrupted(format!(
                        "{} vanished while reading",
                        what()
                    )));
                }
            },
        };
        out.push((v, h, canon));
    }
    Ok(out)
}

/// Decoded content of every stored version: (version, saved_at ms, level, content).
pub(crate) fn export_versions(e: &Engine, sid: &str) -> Result<Vec<(u64, i64, u8, Value)>> {
    let _g = e.rmw_lock()?;
    materialize_all(e, sid)?
        .into_iter()
        .map(|(v, h, canon)| Ok((v, h.saved_at, h.level, sc::from_canonical(&canon)?)))
        .collect()
}

/// One version to write on import.
#[derive(Debug, Clone)]
pub(crate) struct ImportedVersion {
    pub version: u64,
    pub saved_at: i64,
    pub level: u8,
    pub content: Value,
}

/// Replace session `sid` (header and all versions) with imported data; versions ascending.
pub(crate) fn import_session(
    e: &Engine,
    sid: &str,
    rec: &SessionRecord,
    versions: &[ImportedVersion],
) -> Result<()> {
    let mut records: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(versions.len());
    let mut prev: Option<(u64, u32, Vec<u8>)> = None;
    for iv in versions {
        let canon = sc::canonical(&iv.content)?;
        let p = prev.as_ref().map(|(v, d, c)| Prev {
            version: *v,
            depth: *d,
            canon: c,
        });
        let enc = encode_version(iv.level, &iv.content, &canon, iv.saved_at, p)?;
        records.push((version_key(sid, iv.version), e.codec.seal(enc.record)?));
        prev = Some((iv.version, enc.header.depth, canon));
    }
    let header = e.codec.encode(rec)?;
    let _g = e.rmw_lock()?;
    let old: Vec<Bytes> =
        e.t.session_versions
            .scan_prefix(version_prefix(sid))
            .keys()
            .collect::<Result<_, _>>()?;
    e.store
        .transaction(&[&e.t.sessions, &e.t.session_versions], |t| {
            let (s, v) = (&t[0], &t[1]);
            for k in &old {
                v.remove(k)?;
            }
            for (k, r) in &records {
                v.insert(k.as_slice(), r.as_slice())?;
            }
            s.insert(sid.as_bytes(), header.as_slice())?;
            Ok::<_, TxError>(())
        })?;
    Ok(())
}

/// What pruning and recompression did.
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct PruneStats {
    pub sessions_examined: u64,
    pub versions_pruned: u64,
    pub versions_rewritten: u64,
    pub stored_bytes_before: u64,
    pub stored_bytes_after: u64,
}

/// Keep the newest `keep` versions of each session (or of `target` only) and re-encode
/// the kept ones at their level (re-basing any whose delta base was pruned).
pub(crate) fn prune_and_recompress(
    e: &Engine,
    target: Option<&str>,
    keep: usize,
) -> Result<PruneStats> {
    let keep = keep.max(1);
    let ids: Vec<String> = match target {
        Some(t) => {
            require_session(e, t)?;
            vec![t.to_owned()]
        }
        None => {
            let mut ids = Vec::new();
            for k in e.t.sessions.iter().keys() {
                ids.push(
                    String::from_utf8(k?.to_vec())
                        .map_err(|_| Error::corrupted("non-UTF-8 session id"))?,
                );
            }
            ids
        }
    };
    let mut stats = PruneStats::default();
    for sid in ids {
        let _g = e.rmw_lock()?;
        stats.sessions_examined += 1;
        let all = materialize_all(e, &sid)?;
        let sizes: Vec<usize> = version_headers(e, &sid)?
            .into_iter()
            .map(|(_, _, n)| n)
            .collect();
        if sizes.len() != all.len() {
            return Err(Error::corrupted(format!(
                "session {sid}: versions changed while pruning"
            )));
        }
        stats.stored_bytes_before += sizes.iter().map(|n| *n as u64).sum::<u64>();
        let cut = all.len().saturating_sub(keep);
        let mut removes: Vec<Vec<u8>> = Vec::new();
        let mut writes: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut after: u64 = 0;
        let mut prev: Option<(u64, u32, &[u8])> = None;
        for (i, (v, h, canon)) in all.iter().enumerate() {
            let key = version_key(&sid, *v);
            if i < cut {
                removes.push(key);
                continue;
            }
            let content = sc::from_canonical(canon)?;
            let p = prev.map(|(pv, pd, pc)| Prev {
                version: pv,
                depth: pd,
                canon: pc,
            });
            let enc = encode_version(h.level, &content, canon, h.saved_at, p)?;
            // Compared unsealed: sealing draws a fresh nonce, so equal records differ when sealed.
            let stored = e.t.session_versions.get(&key)?;
            let unchanged = match &stored {
                Some(s) => *e.codec.open(s)? == *enc.record.as_slice(),
                None => false,
            };
            let depth = enc.header.depth;
            if unchanged {
                after += stored.map_or(0, |s| s.len()) as u64;
            } else {
                let sealed = e.codec.seal(enc.record)?;
                after += sealed.len() as u64;
                writes.push((key, sealed));
            }
            prev = Some((*v, depth, canon.as_slice()));
        }
        stats.versions_pruned += removes.len() as u64;
        stats.versions_rewritten += writes.len() as u64;
        stats.stored_bytes_after += after;
        if removes.is_empty() && writes.is_empty() {
            continue;
        }
        e.store.transaction(&[&e.t.session_versions], |t| {
            let t = &t[0];
            for (k, r) in &writes {
                t.insert(k.as_slice(), r.as_slice())?;
            }
            for k in &removes {
                t.remove(k.as_slice())?;
            }
            Ok::<_, TxError>(())
        })?;
    }
    e.after_write()?;
    Ok(stats)
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
            e.store
                .transaction(&[&e.t.sessions, &e.t.session_versions], |t| {
                    let (s, v) = (&t[0], &t[1]);
                    v.insert(vkey.as_slice(), record.as_slice())?;
                    s.insert(session_id.as_bytes(), header.as_slice())?;
                    Ok::<_, TxError>(())
                })?;
            e.after_write()?;
            Ok(SessionSaved {
                success: true,
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
                    success: true,
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
                .store
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

//! Stored session versions: the record (header + payload), keyframes and deltas, loading a version and materialising a delta chain.

#[allow(unused_imports)]
use super::*;
use crate::error::DepResult;

/// First byte of every `session_versions` value (record layout 1).
pub(super) const RECORD_TAG: u8 = 0xA1;

pub(super) const ENC_RAW: u8 = 0;

pub(super) const ENC_LZ4: u8 = 1;

pub(super) const ENC_SPLIT: u8 = 2;

pub(super) const ENC_DELTA: u8 = 3;

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
pub(super) enum Body {
    Canon(Vec<u8>),
    Value(Value),
}

impl Body {
    pub(super) fn into_value(self) -> Result<Value> {
        match self {
            Body::Canon(b) => sc::from_canonical(&b),
            Body::Value(v) => Ok(v),
        }
    }

    pub(super) fn into_canon(
        self,
        h: &VersionHeader,
        what: &dyn Fn() -> String,
    ) -> Result<Vec<u8>> {
        let b = match self {
            Body::Canon(b) => b,
            Body::Value(v) => sc::canonical(&v)?,
        };
        verify(&b, h, what)?;
        Ok(b)
    }
}

pub(super) fn verify(canon: &[u8], h: &VersionHeader, what: &dyn Fn() -> String) -> Result<()> {
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

pub(super) fn version_prefix(sid: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(sid.len() + 9);
    k.extend_from_slice(sid.as_bytes());
    k.push(0);
    k
}

pub(super) fn version_of_key(k: &[u8]) -> Result<u64> {
    k.len()
        .checked_sub(8)
        .and_then(|p| k[p..].try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| Error::corrupted("bad session_versions key"))
}

pub(super) fn encode_record(h: &VersionHeader, payload: &[u8]) -> Result<Vec<u8>> {
    let hb = rmp_serde::to_vec_named(h).dep()?;
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
    let h: VersionHeader = rmp_serde::from_slice(r.bytes(n)?).dep()?;
    if h.level > MAX_COMPRESSION_LEVEL || h.encoding > ENC_DELTA {
        return Err(Error::corrupted(format!(
            "session version record with level {} / encoding {}",
            h.level, h.encoding
        )));
    }
    Ok((h, r.rest()))
}

/// Upper bound of any intermediate buffer for a version of `raw_bytes`.
pub(super) fn max_len(raw_bytes: u64) -> usize {
    usize::try_from(raw_bytes)
        .unwrap_or(usize::MAX)
        .saturating_mul(3)
        .saturating_add(1024)
}

/// Decode a keyframe (non-delta) payload.
pub(super) fn keyframe_body(h: &VersionHeader, payload: &[u8], max_depth: usize) -> Result<Body> {
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

pub(super) enum Load {
    Missing,
    BaseMissing,
    Found(Body, VersionHeader),
}

/// Read `version` and the chain of delta bases under it.
pub(super) fn try_load(e: &Engine, sid: &str, version: u64) -> Result<Load> {
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
pub(super) fn load(e: &Engine, sid: &str, version: u64) -> Result<Option<(Body, VersionHeader)>> {
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

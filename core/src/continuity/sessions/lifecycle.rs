//! Sessions beyond save and restore: export and import of every version, and pruning with recompression (what `optimize` runs).

#[allow(unused_imports)]
use super::*;

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
    e.store()
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
        e.store().transaction(&[&e.t.session_versions], |t| {
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

//! Writing one version of a knowledge entry: the transaction body shared by
//! `store`/`update` and `store_many` ([`put_version`]), and the single-entry
//! write with its duplicate check ([`write_version`]).

#[allow(unused_imports)]
use super::*;

/// Inside a write transaction over (semantic, semantic_history, meta, dedup):
/// store `rec` as the current version of `target` (whose record was `cur`), with
/// its duplicate-detection keys when the context detects (`indexed`) and its
/// history entry, keeping the last `keep` versions; returns the index update.
/// One place for `store`/`update` and `store_many`.
#[allow(clippy::too_many_arguments)]
pub(super) fn put_version(
    e: &Engine,
    t: &[crate::storage::TxTree<'_>],
    ctx: &str,
    target: &str,
    cur: Option<&KnowledgeRecord>,
    rec: &KnowledgeRecord,
    indexed: bool,
    keep: u64,
) -> crate::storage::TxResult<IndexOp> {
    if indexed {
        dedup::rekey(
            e,
            &t[3],
            ctx,
            target,
            cur.map(|c| &c.value),
            Some(&rec.value),
        )?;
    }
    t[0].insert(codec::ctx_key(ctx, target).as_slice(), e.codec.encode(rec)?)?;
    // The version superseded stays in history, its validity closed at the new
    // one's start (unless it is pruned right below).
    if let Some(c) = cur
        && keep > 1
    {
        let closed = validity::closed_until(c, validity::from_of(rec));
        if c.valid_until != Some(closed) {
            let old = HistoryRecord {
                value: c.value.clone(),
                recorded_at: c.updated_at,
                valid_from: c.valid_from,
                valid_until: Some(closed),
            };
            t[1].insert(history_key(ctx, target, c.version), e.codec.encode(&old)?)?;
        }
    }
    let hist = HistoryRecord {
        value: rec.value.clone(),
        recorded_at: rec.updated_at,
        valid_from: rec.valid_from,
        valid_until: rec.valid_until,
    };
    t[1].insert(
        history_key(ctx, target, rec.version),
        e.codec.encode(&hist)?,
    )?;
    if rec.version > keep {
        t[1].remove(history_key(ctx, target, rec.version - keep))?;
    }
    Ok(IndexOp::Upsert(index_doc(ctx, target, rec)))
}

/// Write a new version computed by `next` from the current record (None = absent),
/// after the duplicate check `check` (`None`: no check, as for `update`).
pub(super) fn write_version(
    e: &Engine,
    ctx: &str,
    key: &str,
    next: impl Fn(Option<&KnowledgeRecord>) -> Result<Value>,
    embedding: EmbeddingChange,
    check: Option<DupCheck<'_>>,
    span: Span,
) -> Result<Knowledge> {
    input::key(&e.opts.limits, "key", key)?;
    let now = e.opts.clock.now().timestamp_millis();
    let keep = e.opts.limits.semantic_history.max(1) as u64;
    let (new_bytes, dim) = match &embedding {
        EmbeddingChange::Set(Some(v)) => {
            embedder::check("embedding", v)?;
            (Some(VecBytes::from_f32(v)), Some(v.len()))
        }
        _ => (None, None),
    };
    e.touch_context(ctx)?;
    let rec = e.indexed_write_prepared(
        &[&e.t.semantic, &e.t.semantic_history, &e.t.meta, &e.t.dedup],
        || {
            let d = match check {
                Some(c) => dedup::decide(
                    e,
                    ctx,
                    key,
                    c.value,
                    c.explicit,
                    c.cosine,
                    &dedup::Overlay::default(),
                )?,
                None => Decision {
                    indexed: dedup::is_indexed(e, ctx)?,
                    ..Decision::plain(key)
                },
            };
            let claim = match dim {
                Some(dm) if d.write && !d.patch => vectors::claim_dim(e, "embedding", ctx, dm)?,
                _ => None,
            };
            Ok((d, claim))
        },
        |t, (d, claim)| {
            let target = d.target.as_str();
            let dkey = codec::ctx_key(ctx, target);
            let cur: Option<KnowledgeRecord> = match t[0].get(dkey.as_slice())? {
                Some(v) => Some(e.codec.decode(&v)?),
                None => None,
            };
            if !d.write {
                let cur = cur.ok_or_else(|| {
                    Error::not_found(format!("semantic key {target:?} in context {ctx:?}"))
                })?;
                let mut k = to_public(target, cur);
                k.duplicate_of = d.duplicate_of.clone();
                return Ok((k, vec![]));
            }
            let value = match (&cur, d.patch) {
                (Some(c), true) => {
                    let mut v = c.value.clone();
                    if let Some(c) = &check_value(&next)? {
                        json_patch::merge(&mut v, c);
                    }
                    v
                }
                _ => next(cur.as_ref())?,
            };
            input::value(&e.opts.limits, "knowledge", &value)?;
            let keep_embedding = d.patch || matches!(embedding, EmbeddingChange::Keep);
            let rec = KnowledgeRecord {
                version: cur.as_ref().map_or(1, |c| c.version + 1),
                created_at: cur.as_ref().map_or(now, |c| c.created_at),
                updated_at: now,
                value,
                embedding: if keep_embedding {
                    cur.as_ref().and_then(|c| c.embedding.clone())
                } else {
                    new_bytes.clone()
                },
                duplicate_of: if keep_embedding {
                    cur.as_ref().and_then(|c| c.duplicate_of.clone())
                } else {
                    d.link.clone()
                },
                valid_from: span.from.filter(|f| *f != now),
                valid_until: span.until,
            };
            if let Some(k) = claim {
                t[2].insert(k.as_slice(), vectors::dim_value(dim.unwrap_or(0)))?;
            }
            let op = put_version(e, t, ctx, target, cur.as_ref(), &rec, d.indexed, keep)?;
            let mut k = to_public(target, rec);
            if d.duplicate_of.is_some() {
                k.duplicate_of = d.duplicate_of.clone();
            }
            Ok((k, vec![op]))
        },
    )?;
    Ok(rec)
}

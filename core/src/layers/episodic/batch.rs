//! The batch write path of the episodic layer: `record_many`, many episodes in
//! one storage transaction and one index batch, all or nothing.

#[allow(unused_imports)]
use super::*;

/// One validated episode of a batch, ready to write.
struct Row {
    key: Vec<u8>,
    enc: Vec<u8>,
    doc: IndexDoc,
}

/// Record `eps` in `ctx` in one transaction (used by [`Episodic::record_many`]).
///
/// Every item is checked first, with the checks and limits of `record`; the
/// first bad one fails the call with its field named `items[i].field` and
/// nothing is written. Then one transaction writes every record and one
/// index-log entry, and one index batch makes them all searchable.
pub(crate) fn record_many_in(
    e: &Engine,
    ctx: &str,
    mut eps: Vec<NewEpisode>,
    embedder: Option<&dyn Embedder>,
) -> Result<Vec<String>> {
    input::batch_items(&e.opts.limits, "items", eps.len())?;
    if eps.is_empty() {
        return Ok(Vec::new());
    }
    let mut importances = Vec::with_capacity(eps.len());
    for (i, ep) in eps.iter().enumerate() {
        importances.push(validate_new(e, ep).map_err(|err| err.in_item("items", i))?);
    }
    let dim = embedder::fill_batch(
        &mut eps,
        embedder,
        |ep| &mut ep.embedding,
        |ep| embed_text(&ep.summary, &ep.content),
    )?;
    let now = e.opts.clock.now();
    let mut ids = Vec::with_capacity(eps.len());
    let mut rows = Vec::with_capacity(eps.len());
    let mut total = 0usize;
    for (i, (ep, importance)) in eps.into_iter().zip(importances).enumerate() {
        let id = uuid::Uuid::now_v7().to_string();
        let rec = EpisodeRecord {
            id: id.clone(),
            timestamp: ep.timestamp.unwrap_or(now).timestamp_millis(),
            summary: ep.summary,
            content: ep.content,
            participants: ep.participants,
            tags: ep.tags,
            importance,
            embedding: ep.embedding.as_deref().map(VecBytes::from_f32),
        };
        let enc = rec
            .encode(&e.codec)
            .map_err(|err| err.in_item("items", i))?;
        total += enc.len();
        input::batch_bytes(&e.opts.limits, "items", total)?;
        rows.push(Row {
            key: codec::ctx_key(ctx, &id),
            enc,
            doc: index_doc(ctx, &rec),
        });
        ids.push(id);
    }
    e.touch_context(ctx)?;
    e.indexed_write_prepared(
        &[&e.t.episodes, &e.t.meta],
        || match dim {
            Some((i, d)) => vectors::claim_dim(e, &format!("items[{i}].embedding"), ctx, d),
            None => Ok(None),
        },
        |t, claim| {
            let mut ops = Vec::with_capacity(rows.len());
            for r in &rows {
                t[0].insert(r.key.as_slice(), r.enc.as_slice())?;
                ops.push(IndexOp::Upsert(r.doc.clone()));
            }
            if let (Some(k), Some((_, d))) = (claim, dim) {
                t[1].insert(k.as_slice(), vectors::dim_value(d))?;
            }
            Ok(((), ops))
        },
    )?;
    // The ids are new: no cached episode to invalidate. The cache is not
    // filled either: a bulk write would only push out what reads use.
    Ok(ids)
}

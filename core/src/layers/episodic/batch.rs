//! The batch write path of the episodic layer: `record_many`, many episodes in
//! one storage transaction and one index batch, all or nothing.

#[allow(unused_imports)]
use super::*;

use super::dedup::{Item, Planner, Recorded, Writes, new_record, write};

/// Record `eps` in `ctx` in one transaction (used by [`Episodic::record_many`]
/// and [`Episodic::record_many_detailed`]).
///
/// Every item is checked first, with the checks and limits of `record`; the
/// first bad one fails the call with its field named `items[i].field` and
/// nothing is written. Then, under the index writer lock, every item goes
/// through the duplicate policy of `record` in order (against the stored
/// episodes and the batch's earlier items), and one transaction writes every
/// record and one index-log entry, and one index batch makes them all searchable.
pub(crate) fn record_many_in(
    e: &Engine,
    ctx: &str,
    mut eps: Vec<NewEpisode>,
    embedder: Option<&dyn Embedder>,
) -> Result<Vec<Recorded>> {
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
    let mut items = Vec::with_capacity(eps.len());
    let mut total = 0usize;
    let mut oldest = i64::MAX;
    for (i, (ep, importance)) in eps.into_iter().zip(importances).enumerate() {
        let cosine =
            super::dedup::cosine_hint(e, ctx, &ep).map_err(|err| err.in_item("items", i))?;
        let explicit = ep.on_duplicate;
        let rec = new_record(e, ep, importance, now);
        let enc = rec
            .encode(&e.codec)
            .map_err(|err| err.in_item("items", i))?;
        total += enc.len();
        oldest = oldest.min(rec.timestamp);
        input::batch_bytes(&e.opts.limits, "items", total)?;
        items.push(Item {
            rec,
            enc,
            explicit,
            cosine,
        });
    }
    e.touch_context(ctx)?;
    let ((), (w, _)) = e.indexed_write_planned(
        &[&e.t.episodes, &e.t.meta, &e.t.dedup],
        || {
            let mut planner = Planner::new(e, ctx, items.len());
            for (i, item) in items.into_iter().enumerate() {
                planner.add(item).map_err(|err| err.in_item("items", i))?;
            }
            // The new records are not cached (below): their texts move into
            // the index documents.
            let (w, ops) = planner.finish(false)?;
            let created = w.recorded.iter().any(|r| r.created);
            let claim = match dim {
                Some((i, d)) if created => {
                    vectors::claim_dim(e, &format!("items[{i}].embedding"), ctx, d)?.map(|k| (k, d))
                }
                _ => None,
            };
            Ok(((w, claim), ops))
        },
        |t, (w, claim)| write(t, w, claim.as_ref()),
    )?;
    let Writes {
        recorded, merged, ..
    } = w;
    let created = recorded.iter().filter(|r| r.created).count() as u64;
    super::retention::after_write(e, ctx, created, total as u64, oldest);
    // The new ids need no invalidation, and the cache is not filled: a bulk
    // write would only push out what reads use. Merged episodes changed.
    for key in &merged {
        e.state::<EpisodeCache>().invalidate(key);
    }
    Ok(recorded)
}

//! Duplicates of an episode caught on write: its fingerprint and candidates,
//! and what each `on_duplicate` policy writes (see `layers::dedup`).

#[allow(unused_imports)]
use super::*;

use crate::layers::dedup::{self as policy, Candidate, Found, OnDuplicate};
use crate::search::dedup::{self, DupKind, Fingerprint};

/// The result of [`Episodic::record_detailed`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Recorded {
    /// The episode's id: the new one, or the existing one when the write was
    /// skipped or merged into it.
    pub id: String,
    /// The earlier episode this one duplicates, when one was found (whatever the policy).
    pub duplicate_of: Option<String>,
    /// 1.0 for an exact duplicate, else the Jaccard similarity of the texts'
    /// shingles or the cosine of the embeddings; `None` without a duplicate.
    pub similarity: Option<f32>,
    /// Whether a new episode was stored (`false` for `skip` and `merge` of a duplicate).
    pub created: bool,
    /// The policy applied.
    pub on_duplicate: OnDuplicate,
}

/// The exact text of an episode: the trimmed summary and the content's JSON.
pub(crate) fn exact_text(summary: &str, content: &Value) -> String {
    let mut s = summary.trim().to_owned();
    s.push('\0');
    s.push_str(&content.to_string());
    s
}

/// The dedup fingerprint of an episode (its text: the summary and the content's text).
pub(crate) fn fingerprint(seed: u64, summary: &str, content: &Value) -> Fingerprint {
    Fingerprint::of(
        seed,
        &exact_text(summary, content),
        &embed_text(summary, content),
        true,
    )
}

/// Add the dedup keys of every episode of `ctx` written before detection existed.
pub(crate) fn ensure_ready(e: &Engine, ctx: &str) -> Result<()> {
    policy::ensure_ready(e, ctx, DupKind::Episode, |f| {
        let seed = e.codec.hash_seed();
        for item in e.t.episodes.scan_prefix(codec::ctx_prefix(ctx)) {
            let (_, v) = item?;
            let r: EpisodeRecord = e.codec.decode(&v)?;
            f(&r.id, &fingerprint(seed, &r.summary, &r.content))?;
        }
        Ok(())
    })
}

fn candidate(e: &Engine, ctx: &str, id: &str) -> Result<Option<Candidate>> {
    Ok(
        get_shared(e, &codec::ctx_key(ctx, id))?.map(|ep| Candidate {
            exact: exact_text(&ep.summary, &ep.content),
            text: embed_text(&ep.summary, &ep.content),
        }),
    )
}

/// Record an episode in `ctx`, applying its duplicate policy.
pub(crate) fn record_detailed_in(e: &Engine, ctx: &str, ep: NewEpisode) -> Result<Recorded> {
    let importance = validate_new(e, &ep)?;
    let id = uuid::Uuid::now_v7().to_string();
    let rec = EpisodeRecord {
        id,
        timestamp: ep
            .timestamp
            .unwrap_or_else(|| e.opts.clock.now())
            .timestamp_millis(),
        summary: ep.summary,
        content: ep.content,
        participants: ep.participants,
        tags: ep.tags,
        importance,
        embedding: ep.embedding.as_deref().map(VecBytes::from_f32),
        seen_count: 1,
        last_seen: None,
        duplicate_of: None,
    };
    let dim = ep.embedding.as_ref().map(Vec::len);
    let fp = fingerprint(e.codec.hash_seed(), &rec.summary, &rec.content);
    // The nearest stored vector, found before the writer lock as a search is.
    let cosine = match &ep.embedding {
        Some(v) => crate::layers::dedup::nearest_vector(e, Kind::Episode, ctx, v, None)?,
        None => None,
    };
    e.touch_context(ctx)?;
    // Taken before the write: a fill racing an invalidation of this key is refused.
    let generation = e.state::<EpisodeCache>().generation();
    let on_duplicate = ep.on_duplicate;
    let (recorded, cached, touched) = e.indexed_write_prepared(
        &[&e.t.episodes, &e.t.meta, &e.t.dedup],
        || {
            let (plan, recorded) = plan(e, ctx, on_duplicate, rec, &fp, cosine)?;
            let claim = match (&plan, dim) {
                (Plan::Insert { .. }, Some(d)) => vectors::claim_dim(e, "embedding", ctx, d)?,
                _ => None,
            };
            Ok((plan, recorded, claim))
        },
        |t, (plan, recorded, claim)| {
            if let Some(k) = claim {
                t[1].insert(k.as_slice(), vectors::dim_value(dim.unwrap_or(0)))?;
            }
            Ok(match plan {
                Plan::Insert {
                    key,
                    enc,
                    doc,
                    keys,
                    rec,
                } => {
                    t[0].insert(key.as_slice(), enc.as_slice())?;
                    for k in keys {
                        t[2].insert(k.as_slice(), &[][..])?;
                    }
                    (
                        (recorded.clone(), Some((key.clone(), rec.clone())), None),
                        vec![IndexOp::Upsert(doc.clone())],
                    )
                }
                Plan::Skip => ((recorded.clone(), None, None), vec![]),
                Plan::Merge { key, enc, doc } => {
                    t[0].insert(key.as_slice(), enc.as_slice())?;
                    (
                        (recorded.clone(), None, Some(key.clone())),
                        vec![IndexOp::Upsert(doc.clone())],
                    )
                }
            })
        },
    )?;
    // Write-through: the episode just recorded is the likeliest to be searched next.
    // (`Episode::from` of the record is exactly what decoding the stored bytes gives.)
    if let Some((key, rec)) = cached {
        e.state::<EpisodeCache>()
            .insert(&key, Arc::new(Episode::from(*rec)), generation);
    }
    if let Some(key) = touched {
        e.state::<EpisodeCache>().invalidate(&key);
    }
    Ok(recorded)
}

/// What a record call writes.
pub(crate) enum Plan {
    /// A new episode (with its dedup keys).
    Insert {
        key: Vec<u8>,
        enc: Vec<u8>,
        doc: IndexDoc,
        keys: Vec<Vec<u8>>,
        rec: Box<EpisodeRecord>,
    },
    /// Nothing: the duplicate stands for the new episode.
    Skip,
    /// The duplicate, updated.
    Merge {
        key: Vec<u8>,
        enc: Vec<u8>,
        doc: IndexDoc,
    },
}

/// Decide what to write for `rec` (a new episode of `ctx` with fingerprint
/// `fp`) under policy `explicit` (else the context's). Call under the index writer lock.
pub(crate) fn plan(
    e: &Engine,
    ctx: &str,
    explicit: Option<OnDuplicate>,
    mut rec: EpisodeRecord,
    fp: &Fingerprint,
    cosine: Option<(String, f32)>,
) -> Result<(Plan, Recorded)> {
    ensure_ready(e, ctx)?;
    let on_duplicate = policy::effective(e, ctx, explicit)?;
    let found = policy::find(
        e,
        ctx,
        DupKind::Episode,
        fp,
        &exact_text(&rec.summary, &rec.content),
        None,
        cosine,
        &mut |id| candidate(e, ctx, id),
    )?;
    let mut recorded = Recorded {
        id: rec.id.clone(),
        duplicate_of: found.as_ref().map(|f| f.id.clone()),
        similarity: found.as_ref().map(|f| f.similarity),
        created: true,
        on_duplicate,
    };
    let found = match (found, on_duplicate) {
        (Some(f), OnDuplicate::Skip | OnDuplicate::Merge) => f,
        (found, _) => {
            if on_duplicate == OnDuplicate::Link {
                rec.duplicate_of = found.map(|f| f.id);
            }
            let key = codec::ctx_key(ctx, &rec.id);
            let plan = Plan::Insert {
                enc: e.codec.encode(&rec)?,
                doc: index_doc(ctx, &rec),
                keys: dedup::keys(ctx, DupKind::Episode, &rec.id, fp),
                key,
                rec: Box::new(rec),
            };
            return Ok((plan, recorded));
        }
    };
    recorded.id = found.id.clone();
    recorded.created = false;
    if on_duplicate == OnDuplicate::Skip {
        return Ok((Plan::Skip, recorded));
    }
    merge(e, ctx, &found, &rec).map(|p| (p, recorded))
}

/// The duplicate `found` with `new` folded in: tags and participants united
/// (the existing ones first; at most `max_tags` each, surplus new ones
/// dropped), the higher importance, `seen_count` + 1, `last_seen` the new
/// episode's time.
fn merge(e: &Engine, ctx: &str, found: &Found, new: &EpisodeRecord) -> Result<Plan> {
    let key = codec::ctx_key(ctx, &found.id);
    let Some(v) = e.t.episodes.get(&key)? else {
        return Err(Error::not_found(format!(
            "episode {:?} in context {ctx:?}",
            found.id
        )));
    };
    let mut cur: EpisodeRecord = e.codec.decode(&v)?;
    let cap = e.opts.limits.max_tags;
    for (into, from) in [
        (&mut cur.tags, &new.tags),
        (&mut cur.participants, &new.participants),
    ] {
        for t in from {
            if into.len() < cap && !into.contains(t) {
                into.push(t.clone());
            }
        }
    }
    cur.importance = cur.importance.max(new.importance);
    cur.seen_count = cur.seen_count.saturating_add(new.seen_count.max(1));
    cur.last_seen = Some(cur.last_seen.unwrap_or(cur.timestamp).max(new.timestamp));
    Ok(Plan::Merge {
        enc: e.codec.encode(&cur)?,
        doc: index_doc(ctx, &cur),
        key,
    })
}

/// Remove the dedup keys of a deleted episode (its stored bytes `old`).
pub(crate) fn remove_keys(
    e: &Engine,
    t: &crate::storage::TxTree<'_>,
    ctx: &str,
    old: &[u8],
) -> crate::storage::TxResult<()> {
    let r: EpisodeRecord = e.codec.decode(old)?;
    let fp = fingerprint(e.codec.hash_seed(), &r.summary, &r.content);
    for k in dedup::keys(ctx, DupKind::Episode, &r.id, &fp) {
        t.remove(k)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An episode record as versions before duplicate detection wrote it.
    #[derive(Serialize)]
    struct OldRecord {
        id: String,
        timestamp: i64,
        summary: String,
        content: Value,
        participants: Vec<String>,
        tags: Vec<String>,
        importance: u8,
    }

    #[test]
    fn an_old_record_decodes_with_defaults() {
        let old = OldRecord {
            id: "x".into(),
            timestamp: 5,
            summary: "s".into(),
            content: Value::Null,
            participants: vec![],
            tags: vec!["t".into()],
            importance: 3,
        };
        let bytes = codec::encode(&old).unwrap();
        let r: EpisodeRecord = codec::decode(&bytes).unwrap();
        assert_eq!(r.seen_count, 1);
        assert_eq!(r.last_seen, None);
        assert_eq!(r.duplicate_of, None);
        assert_eq!(r.tags, vec!["t"]);
        // A record with the defaults is written as before (no new fields).
        let again = codec::encode(&r).unwrap();
        assert_eq!(again, bytes);
    }
}

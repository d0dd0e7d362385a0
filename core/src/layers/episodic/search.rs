//! Episode search: BM25 and vector lists with filters, fused; `as_of` keeps
//! the episodes recorded by then.

#[allow(unused_imports)]
use super::*;

pub(crate) fn search_in(
    e: &Engine,
    ctx: &str,
    query: &str,
    filters: &SearchFilters,
    limit: usize,
    vq: &VectorQuery,
    embedder: Option<&dyn Embedder>,
) -> Result<Vec<EpisodeHit>> {
    crate::util::input::search(&e.opts.limits, "query", query, limit)?;
    check_list(e, "tags", &filters.tags)?;
    check_list(e, "participants", &filters.participants)?;
    if let Some(m) = filters.min_importance
        && !(1..=10).contains(&m)
    {
        return Err(Error::invalid(
            "min_importance",
            format!("must be in 1..=10, got {m}"),
        ));
    }
    if let (Some(s), Some(u)) = (filters.since, filters.until)
        && s > u
    {
        return Err(Error::invalid("since", "must not be after `until`"));
    }
    let since_ms = filters.since.map(|t| t.timestamp_millis());
    let until_ms = filters.until.map(|t| t.timestamp_millis());
    let min_importance = filters.min_importance.map(u64::from);
    let text_list = |depth: usize| -> Result<Vec<(String, f32)>> {
        let q = IndexQuery {
            kind: Kind::Episode,
            ctx,
            text: query,
            tags_all: &filters.tags,
            participants_any: &filters.participants,
            since_ms,
            until_ms,
            min_importance,
            limit: depth,
        };
        let mut out = Vec::new();
        for (uid, score) in e.search_index(&q)? {
            let (kind, c, id) = index::parse_uid(&uid)?;
            // The index scopes by a hash of (kind, context): drop a collision.
            if kind == Kind::Episode && c == ctx {
                out.push((id, score));
            }
        }
        Ok(out)
    };
    let row_filter = vector::RowFilter {
        tags_all: &filters.tags,
        participants_any: &filters.participants,
        since_ms,
        until_ms,
        min_importance,
    };
    let as_of = filters.as_of;
    // Episodes recorded after `as_of` are left out after the search (the
    // index knows when an episode happened, not when it was recorded): the
    // lists are read deeper until `limit` hits are found or they run out.
    // With `rank_by_utility`, more candidates than `limit` are gathered and
    // re-ranked (`retention::after_search` cuts them to `limit`).
    let want = retention::search_depth(e, filters, limit);
    let mut depth = want;
    loop {
        let fused = vectors::fused_hits(
            e,
            Kind::Episode,
            ctx,
            query,
            vq,
            embedder,
            depth,
            &row_filter,
            depth == want,
            text_list,
        )?;
        let exhausted = fused.len() < depth;
        let mut hits = Vec::with_capacity(fused.len().min(want));
        for f in fused {
            // sled is the source of truth: a hit whose record is gone is dropped.
            let Some(ep) = get_shared(e, ctx, &f.key)? else {
                continue;
            };
            if as_of.is_some_and(|t| ep.recorded_at > t) {
                continue;
            }
            hits.push(EpisodeHit {
                episode: Arc::unwrap_or_clone(ep),
                score: f.score,
                bm25_rank: f.bm25_rank,
                vector_rank: f.vector_rank,
            });
            if hits.len() == want {
                break;
            }
        }
        if as_of.is_none() || hits.len() >= want || exhausted || depth >= MAX_AS_OF_DEPTH {
            retention::after_search(e, ctx, filters, &mut hits, limit)?;
            return Ok(hits);
        }
        depth = (depth * 4).min(MAX_AS_OF_DEPTH);
    }
}

/// The deepest an `as_of` search reads its candidate lists to fill `limit` hits.
const MAX_AS_OF_DEPTH: usize = 10_000;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use chrono::{TimeZone, Utc};

    use crate::search::index::Kind;
    use crate::{Durability, ManualClock, Memory, NewEpisode, SearchFilters, VectorQuery};

    /// An `as_of` search that reads its lists again, deeper, counts once in
    /// the store's fusion evidence.
    #[test]
    fn an_as_of_search_read_deeper_counts_once_in_the_evidence() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = Utc.with_ymd_and_hms(2026, 5, 1, 12, 0, 0).unwrap();
        let clock = Arc::new(ManualClock::new(t0));
        let mem = Memory::builder()
            .path(dir.path())
            .durability(Durability::Manual)
            .clock(clock.clone())
            .open()
            .unwrap();
        let ep = mem.episodic();
        ep.record(NewEpisode::new("billing outage, first report").embedding(vec![0.0, 1.0, 0.0]))
            .unwrap();
        clock.advance(Duration::from_secs(60));
        // Recorded after the time asked: the best hit of both lists, so the
        // first pass (depth 1) finds nothing recorded by then.
        ep.record(NewEpisode::new("billing outage").embedding(vec![1.0, 0.0, 0.0]))
            .unwrap();
        let filters = SearchFilters {
            as_of: Some(t0 + chrono::Duration::seconds(30)),
            ..Default::default()
        };
        let hits = ep
            .search_hybrid(
                "billing outage",
                &filters,
                1,
                &VectorQuery::embedding(vec![1.0, 0.0, 0.0]),
            )
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].episode.summary, "billing outage, first report");
        let evidence = mem.scope.engine.fusion_evidence(Kind::Episode);
        assert_eq!(evidence.counted(), 1);
    }

    /// What the hybrid searches taught is kept with the store: a process that
    /// opens it again goes on from the same counts.
    #[test]
    fn the_fusion_evidence_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let open = || Memory::builder().path(dir.path()).open().unwrap();
        let search = |mem: &Memory| {
            mem.episodic()
                .search_hybrid(
                    "billing outage",
                    &SearchFilters::default(),
                    5,
                    &VectorQuery::embedding(vec![1.0, 0.0, 0.0]),
                )
                .unwrap()
        };
        let counted = |mem: &Memory| mem.scope.engine.fusion_evidence(Kind::Episode).counted();
        let mem = open();
        mem.episodic()
            .record(NewEpisode::new("billing outage").embedding(vec![1.0, 0.0, 0.0]))
            .unwrap();
        assert_eq!(search(&mem).len(), 1);
        assert_eq!(counted(&mem), 1);
        drop(mem);
        let mem = open();
        assert_eq!(counted(&mem), 1);
        assert_eq!(search(&mem).len(), 1);
        assert_eq!(counted(&mem), 2);
    }
}

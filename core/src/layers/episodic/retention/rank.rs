//! The search option `rank_by_utility`: episode scores with importance and
//! recency added (off by default).

use crate::engine::Engine;
use crate::layers::episodic::{EpisodeHit, SearchFilters};

/// Half-life of the recency term of `rank_by_utility`, in days.
pub const RANK_HALF_LIFE_DAYS: f64 = 30.0;
/// Weight of importance in `rank_by_utility`.
pub const RANK_IMPORTANCE_WEIGHT: f64 = 0.5;
/// Weight of recency in `rank_by_utility`.
pub const RANK_RECENCY_WEIGHT: f64 = 0.5;

/// How many hits a search fetches before ranking: `limit` without
/// `rank_by_utility`; with it, four times `limit` (at least `limit` + 16, at
/// most `max_results`), so that an important or recent episode just below the
/// cut can rise into it.
pub(crate) fn search_depth(e: &Engine, filters: &SearchFilters, limit: usize) -> usize {
    if filters.rank_by_utility {
        let cap = e.opts.limits.max_results.max(limit);
        limit
            .saturating_mul(4)
            .max(limit.saturating_add(16))
            .min(cap)
    } else {
        limit
    }
}

/// Rank `hits` by `base · (1 + RANK_IMPORTANCE_WEIGHT · (importance − 1)/9 +
/// RANK_RECENCY_WEIGHT · 0.5^(age_days / RANK_HALF_LIFE_DAYS))`, where `base`
/// is the hit's score (1 for every hit when no hit has a positive score, as
/// for an empty query) and `age` the time since the episode's last activity
/// (its time, or the last merge of a duplicate). The new score replaces
/// `score`; equal scores keep their order.
pub(crate) fn rerank(now_ms: i64, hits: &mut [EpisodeHit]) {
    let any_positive = hits.iter().any(|h| h.score > 0.0);
    for h in hits.iter_mut() {
        let ep = &h.episode;
        let activity = ep.last_seen.map_or(ep.timestamp, |l| l.max(ep.timestamp));
        let age_ms = (now_ms - activity.timestamp_millis()).max(0);
        #[allow(clippy::cast_precision_loss)]
        let days = age_ms as f64 / 86_400_000.0;
        let imp = f64::from(ep.importance.clamp(1, 10) - 1) / 9.0;
        let rec = 0.5f64.powf(days / RANK_HALF_LIFE_DAYS);
        let base = if any_positive {
            f64::from(h.score)
        } else {
            1.0
        };
        #[allow(clippy::cast_possible_truncation)]
        let s = (base * (1.0 + RANK_IMPORTANCE_WEIGHT * imp + RANK_RECENCY_WEIGHT * rec)) as f32;
        h.score = s;
    }
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
}

//! `optimize`: purge expired items, prune and recompress session versions, merge index segments.
//!
//! * `light`: sweep expired short-term items (all contexts), flush.
//! * `medium`: + keep the newest `Options::session_retention` versions of every session (or of
//!   `target_session` only), re-basing kept level-3 deltas whose base is pruned, and re-encode the
//!   kept versions at their level.
//! * `aggressive`: + commit and merge all index segments into one, garbage-collect unreferenced
//!   index files and drop index-log records covered by the commit.
//!
//! sled 0.34 has no compaction API and cannot be swapped under live handles, so no level copies
//! the database: space freed in sled is reused by later writes, and the file shrinks only when
//! sled releases trailing segments. `bytes_saved` is what the store directory really lost,
//! measured after a flush before and after (it can be 0 or negative when sled keeps or grows
//! its file). See `docs/sessions.md` ("Retention and optimize").

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::admin::handle::Admin;
use crate::{Error, Result, continuity::sessions, layers::short_term, util::input};

/// How much work [`Admin::optimize`](crate::Admin::optimize) does (ordered: each level includes the ones before).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizeLevel {
    /// Purge expired items.
    #[default]
    Light,
    /// Also prune session versions past the retention setting and recompress.
    Medium,
    /// Also merge index segments and garbage-collect index files.
    Aggressive,
}

impl OptimizeLevel {
    /// `"light"`, `"medium"` or `"aggressive"`.
    pub fn as_str(self) -> &'static str {
        match self {
            OptimizeLevel::Light => "light",
            OptimizeLevel::Medium => "medium",
            OptimizeLevel::Aggressive => "aggressive",
        }
    }
}

impl std::str::FromStr for OptimizeLevel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "light" => Ok(OptimizeLevel::Light),
            "medium" => Ok(OptimizeLevel::Medium),
            "aggressive" => Ok(OptimizeLevel::Aggressive),
            other => Err(Error::invalid(
                "level",
                format!("expected \"light\", \"medium\" or \"aggressive\", got {other:?}"),
            )),
        }
    }
}

/// Result of [`Admin::optimize`](crate::Admin::optimize).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct OptimizeReport {
    /// Store directory size before minus after (each measured after a flush); may be ≤ 0.
    pub bytes_saved: i64,
    /// What each step did (counts, bytes, index segments before/after).
    pub optimization_details: Value,
}

/// Merge every index segment into one. tantivy's background merge policy may merge some
/// of the same segments concurrently, which makes an explicit merge fail with "segments …
/// could not be found"; the segment list is then re-read and the merge retried.
fn merge_index(index: &crate::search::index::SearchIndex) -> Result<()> {
    let mut attempt = 0u64;
    loop {
        match index.merge_all() {
            Ok(()) => return Ok(()),
            Err(Error::Index { .. }) if attempt < 20 => {
                attempt += 1;
                // Let the background merge that won the race finish.
                std::thread::sleep(std::time::Duration::from_millis(10 * attempt));
            }
            Err(err) => return Err(err),
        }
    }
}

/// Progress of a long operation ([`Admin::optimize_with_progress`](crate::Admin::optimize_with_progress),
/// [`Admin::import_with_progress`](crate::Admin::import_with_progress)).
///
/// Stages come in a fixed order and each is reported at least at its start (`done == 0`) and
/// at its end; inside long loops it is also reported every few items. Within one stage
/// `done` never decreases; `total` is given when known up front.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// What is running: `optimize` reports `"sweep"` (expired items, retention policies), `"prune_sessions"` (medium and up:
    /// pruning and recompressing, one session at a time), `"merge_index"` (aggressive) and
    /// `"flush"`; `import` reports `"validate"` (reading and checking every line; `done`
    /// counts lines) and `"apply"` (`done` counts records written, out of `total`).
    pub stage: &'static str,
    /// Items done so far in this stage.
    pub done: u64,
    /// Items in this stage, when known.
    pub total: Option<u64>,
    /// Human-readable detail.
    pub message: String,
}

impl Progress {
    pub(crate) fn new(
        stage: &'static str,
        done: u64,
        total: Option<u64>,
        message: impl Into<String>,
    ) -> Self {
        Progress {
            stage,
            done,
            total,
            message: message.into(),
        }
    }
}

/// Report progress inside a loop every this many items (sessions, records, lines).
pub(crate) const PROGRESS_EVERY: u64 = 64;

/// A progress callback that ignores every report.
pub(crate) fn no_progress(_: Progress) {}

/// Every session id, in id order.
fn session_ids(e: &crate::engine::Engine) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    for k in e.t.sessions.iter().keys() {
        ids.push(
            String::from_utf8(k?.to_vec()).map_err(|_| Error::corrupted("non-UTF-8 session id"))?,
        );
    }
    Ok(ids)
}

/// What `optimize` reports of retention: per context with a policy, its
/// policy, the episodes this run evicted and the total evicted so far.
fn retention_details(e: &crate::engine::Engine, evicted: &[(String, u64)]) -> Result<Value> {
    let mut out = serde_json::Map::new();
    let mut total = 0;
    for s in crate::layers::episodic::retention::statuses(e)? {
        let now = evicted
            .iter()
            .find(|(c, _)| *c == s.context)
            .map_or(0, |(_, n)| *n);
        total += now;
        out.insert(
            s.context.clone(),
            json!({"policy": s.policy, "evicted": now, "evicted_total": s.evicted}),
        );
    }
    Ok(json!({"episodes_evicted": total, "contexts": out}))
}

impl Admin {
    /// Reclaim space and tidy the store; see [`OptimizeLevel`]. `target_session` limits
    /// session pruning (medium and aggressive) to one session (`NotFound` if unknown).
    pub fn optimize(
        &self,
        level: OptimizeLevel,
        target_session: Option<&str>,
    ) -> Result<OptimizeReport> {
        self.optimize_with_progress(level, target_session, &no_progress)
    }

    /// [`Admin::optimize`](crate::Admin::optimize), calling `progress` at each stage boundary and every few
    /// sessions while pruning (see [`Progress`] for the stages).
    ///
    /// `progress` runs on the calling thread, never while the engine holds a lock, so it may
    /// call back into the engine; it should still be quick (forward the report to a channel
    /// or a progress bar): the optimization waits for it.
    pub fn optimize_with_progress(
        &self,
        level: OptimizeLevel,
        target_session: Option<&str>,
        progress: &dyn Fn(Progress),
    ) -> Result<OptimizeReport> {
        let e = &self.scope.engine;
        e.timed("optimize", || {
            if let Some(sid) = target_session {
                input::key(&e.opts.limits, "target_session", sid)?;
                if sessions::load_session(e, sid)?.is_none() {
                    return Err(Error::not_found(format!("session {sid:?}")));
                }
            }
            e.flush()?;
            let bytes_before = e.bytes_on_disk();

            progress(Progress::new("sweep", 0, None, "purging expired short-term items"));
            let expired = short_term::sweep_expired(e)?;
            // Retention policies are enforced in the sweep stage too (episodes evicted).
            let evicted = crate::layers::episodic::retention::enforce_all(e, false)?;
            progress(Progress::new(
                "sweep",
                expired as u64,
                Some(expired as u64),
                format!("{expired} expired items removed"),
            ));
            let mut details = json!({
                "level": level.as_str(),
                "target_session": target_session,
                "expired_items_removed": expired,
            });
            details["retention"] = retention_details(e, &evicted)?;

            if level >= OptimizeLevel::Medium {
                let keep = e.opts.session_retention.max(1);
                // One session at a time (each under its own lock inside `prune_and_recompress`),
                // so progress is reported between sessions with no lock held.
                let ids = match target_session {
                    Some(t) => vec![t.to_owned()],
                    None => session_ids(e)?,
                };
                let total = ids.len() as u64;
                progress(Progress::new(
                    "prune_sessions",
                    0,
                    Some(total),
                    format!("pruning and recompressing {total} sessions (keeping {keep} versions each)"),
                ));
                let mut s = sessions::PruneStats::default();
                for (i, sid) in ids.iter().enumerate() {
                    let one = sessions::prune_and_recompress(e, Some(sid), keep)?;
                    s.sessions_examined += one.sessions_examined;
                    s.versions_pruned += one.versions_pruned;
                    s.versions_rewritten += one.versions_rewritten;
                    s.stored_bytes_before += one.stored_bytes_before;
                    s.stored_bytes_after += one.stored_bytes_after;
                    let done = i as u64 + 1;
                    if done.is_multiple_of(PROGRESS_EVERY) && done < total {
                        progress(Progress::new(
                            "prune_sessions",
                            done,
                            Some(total),
                            format!("{done}/{total} sessions, {} versions pruned", s.versions_pruned),
                        ));
                    }
                }
                progress(Progress::new(
                    "prune_sessions",
                    total,
                    Some(total),
                    format!(
                        "{total} sessions: {} versions pruned, {} rewritten",
                        s.versions_pruned, s.versions_rewritten
                    ),
                ));
                details["sessions"] = json!({
                    "retention": keep,
                    "sessions_examined": s.sessions_examined,
                    "versions_pruned": s.versions_pruned,
                    "versions_rewritten": s.versions_rewritten,
                    "stored_bytes_before": s.stored_bytes_before,
                    "stored_bytes_after": s.stored_bytes_after,
                });
            }

            if level >= OptimizeLevel::Aggressive && e.text_index().is_none() {
                // PostgreSQL searches in SQL: the GIN index's pending list is
                // what corresponds to unmerged segments; the table is also
                // analyzed (the search plan depends on its statistics).
                progress(Progress::new("merge_index", 0, Some(1), "cleaning the search index's pending list"));
                let pages = e.store().clean_search_index()?;
                let (documents, _) = e.index_doc_stats();
                progress(Progress::new(
                    "merge_index",
                    1,
                    Some(1),
                    format!("{pages} pending-list pages moved into the search index"),
                ));
                details["index"] = json!({
                    "backend": "postgresql",
                    "pending_pages_cleaned": pages,
                    "documents": documents,
                    "log_entries": e.index_log_backlog()?,
                });
            } else if level >= OptimizeLevel::Aggressive {
                progress(Progress::new("merge_index", 0, Some(1), "merging index segments"));
                e.commit_index()?;
                let index = e.text_index().ok_or_else(|| Error::storage("no tantivy index"))?;
                let segments_before = index.committed_segments()?;
                merge_index(index)?;
                e.prune_index_log()?;
                let segments_after = index.committed_segments()?;
                let (documents, _) = e.index_doc_stats();
                progress(Progress::new(
                    "merge_index",
                    1,
                    Some(1),
                    format!("{segments_before} index segments merged into {segments_after}"),
                ));
                details["index"] = json!({
                    "segments_before": segments_before,
                    "segments_after": segments_after,
                    "documents": documents,
                    "log_entries": e.index_log_backlog()?,
                });
            }

            progress(Progress::new("flush", 0, Some(1), "flushing to disk"));
            e.flush()?;
            let bytes_after = e.bytes_on_disk();
            let saved = i64::try_from(bytes_before).unwrap_or(i64::MAX) - i64::try_from(bytes_after).unwrap_or(i64::MAX);
            progress(Progress::new("flush", 1, Some(1), format!("{saved} bytes saved")));
            details["storage"] = json!({
                "bytes_before": bytes_before,
                "bytes_after": bytes_after,
                "note": "sled 0.34 is not compacted in place: freed pages are reused by later writes; \
                         the directory shrinks only when sled releases whole trailing segments",
            });
            Ok(OptimizeReport {
                bytes_saved: saved,
                optimization_details: details,
            })
        })
    }
}

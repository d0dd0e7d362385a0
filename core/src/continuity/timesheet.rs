//! The LLM timesheet: punch in / punch out, file detection under the workspace roots, reports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::clock::millis_to_dt;
use crate::engine::Engine;
use crate::engine::Scope;
use crate::layers::dedup::OnDuplicate;
use crate::layers::episodic::{self, NewEpisode};
use crate::{Error, Result, util::input};

/// Longest episode summary a finished task produces, in characters.
const EPISODE_SUMMARY_CHARS: usize = 500;
/// Characters of the punch-in `context` text copied into the task's episode content (the
/// task keeps it whole), so a long text never makes the episode, and punch-out, fail.
pub const EPISODE_CONTEXT_CHARS: usize = 2_000;
/// Files listed in a task's episode content (the task itself keeps up to `limits.max_results`).
const EPISODE_FILES: usize = 100;

/// Stored task (the `tasks` tree, keyed by task id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskRecord {
    pub task_id: String,
    pub llm_name: String,
    pub description: String,
    /// The Memstrata context (namespace) of the task and its episode.
    pub context: String,
    /// Free text given at punch-in (`Task::context`); absent in records written
    /// before it existed.
    #[serde(default)]
    pub context_text: Option<String>,
    pub start_time: i64,
    pub end_time: Option<i64>,
    pub summary: Option<String>,
    pub duration_seconds: Option<f64>,
    pub files_modified: u64,
    pub files: Vec<String>,
    pub episode_id: Option<String>,
}

/// Result of [`Timesheet::punch_in`](crate::Timesheet::punch_in).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PunchIn {
    /// UUIDv7 id of the new task.
    pub task_id: String,
    /// When the task started (the engine clock).
    pub start_time: DateTime<Utc>,
}

/// Result of [`Timesheet::punch_out`](crate::Timesheet::punch_out).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PunchOut {
    /// Seconds between punch-in and punch-out (the engine clock).
    pub duration_seconds: f64,
    /// Regular files under the workspace roots modified during the task (0 without detection).
    pub files_modified: u64,
    /// Those files, relative to their root, sorted (at most `limits.max_results` listed).
    pub files: Vec<String>,
}

/// Whether a task is still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    /// Punched in, not yet out.
    Open,
    /// Punched out.
    Closed,
}

/// Which tasks [`Timesheet::tasks`](crate::Timesheet::tasks) returns by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatusFilter {
    /// Open tasks only.
    Open,
    /// Closed tasks only.
    Closed,
    /// Both (default).
    #[default]
    All,
}

impl std::str::FromStr for TaskStatusFilter {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "open" => Ok(TaskStatusFilter::Open),
            "closed" => Ok(TaskStatusFilter::Closed),
            "all" => Ok(TaskStatusFilter::All),
            other => Err(Error::invalid(
                "status",
                format!("expected \"open\", \"closed\" or \"all\", got {other:?}"),
            )),
        }
    }
}

/// A timesheet task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Task {
    /// Task id.
    pub task_id: String,
    /// The model that did the work.
    pub llm_name: String,
    /// What it set out to do.
    pub task_description: String,
    /// Free text given at punch-in as `context` (the continuity specification's
    /// "additional context"), `None` when none was given.
    pub context: Option<String>,
    /// The Memstrata context (namespace) the task and its episode belong to.
    pub namespace: String,
    /// Open or closed.
    pub status: TaskStatus,
    /// Punch-in time.
    pub start_time: DateTime<Utc>,
    /// Punch-out time.
    pub end_time: Option<DateTime<Utc>>,
    /// Seconds worked (closed tasks).
    pub duration_seconds: Option<f64>,
    /// Summary given at punch-out.
    pub summary: Option<String>,
    /// Files detected at punch-out.
    pub files_modified: u64,
    /// Those files (relative to their root).
    pub files: Vec<String>,
    /// The episode recorded at punch-out (tagged `task`).
    pub episode_id: Option<String>,
}

impl From<TaskRecord> for Task {
    fn from(r: TaskRecord) -> Self {
        Task {
            status: if r.end_time.is_some() {
                TaskStatus::Closed
            } else {
                TaskStatus::Open
            },
            task_id: r.task_id,
            llm_name: r.llm_name,
            task_description: r.description,
            context: r.context_text,
            namespace: r.context,
            start_time: millis_to_dt(r.start_time),
            end_time: r.end_time.map(millis_to_dt),
            duration_seconds: r.duration_seconds,
            summary: r.summary,
            files_modified: r.files_modified,
            files: r.files,
            episode_id: r.episode_id,
        }
    }
}

/// Filter for [`Timesheet::tasks`](crate::Timesheet::tasks); every field optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TaskFilter {
    /// Only tasks of this model.
    pub llm_name: Option<String>,
    /// Only tasks of this Memstrata context (namespace).
    pub namespace: Option<String>,
    /// Open, closed or all (default).
    pub status: TaskStatusFilter,
    /// Started at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Started at or before this time.
    pub until: Option<DateTime<Utc>>,
    /// At most this many (default and maximum: `limits.max_results`).
    pub limit: Option<usize>,
}

/// One model's line in a [`TimesheetReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlmTimesheet {
    /// The model.
    pub llm_name: String,
    /// Tasks started in the period.
    pub tasks: u64,
    /// Of which still open.
    pub open_tasks: u64,
    /// Seconds worked on the closed ones.
    pub total_seconds: f64,
    /// Distinct files modified across its closed tasks.
    pub files_modified: u64,
    /// Those files, sorted (at most `limits.max_results` listed).
    pub files: Vec<String>,
}

/// Result of [`Timesheet::report`](crate::Timesheet::report).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TimesheetReport {
    /// Start of the period (inclusive), if bounded.
    pub since: Option<DateTime<Utc>>,
    /// End of the period (inclusive), if bounded.
    pub until: Option<DateTime<Utc>>,
    /// When the report was made (the engine clock).
    pub generated_at: DateTime<Utc>,
    /// Tasks started in the period.
    pub tasks: u64,
    /// Seconds worked on closed tasks in the period.
    pub total_seconds: f64,
    /// One line per model, by name.
    pub llms: Vec<LlmTimesheet>,
}

pub(crate) fn load_task(e: &Engine, id: &str) -> Result<Option<TaskRecord>> {
    Ok(match e.t.tasks.get(id.as_bytes())? {
        Some(v) => Some(e.codec.decode(&v)?),
        None => None,
    })
}

pub(crate) fn all_tasks(e: &Engine) -> Result<Vec<TaskRecord>> {
    let mut out = Vec::new();
    for item in e.t.tasks.iter() {
        let (_, v) = item?;
        out.push(e.codec.decode(&v)?);
    }
    Ok(out)
}

/// Write a task record as is (import).
pub(crate) fn put_task(e: &Engine, rec: &TaskRecord) -> Result<()> {
    e.t.tasks
        .insert(rec.task_id.as_bytes(), e.codec.encode(rec)?)?;
    Ok(())
}

fn system_time_ms(t: std::time::SystemTime) -> i64 {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

fn rel_path(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Regular files under the workspace roots with a modification time in `[start_ms, end_ms]`.
///
/// Honours `.gitignore` (also outside a git repository), `.ignore` and
/// `.git/info/exclude`; skips `.git/`; never follows symbolic links (a link is
/// neither followed nor counted). With several roots, paths are prefixed with
/// the root's directory name.
pub(crate) fn modified_files(e: &Engine, start_ms: i64, end_ms: i64) -> Result<(u64, Vec<String>)> {
    let roots = &e.opts.workspace_roots;
    if roots.is_empty() {
        return Err(Error::invalid(
            "detect_files",
            "no workspace roots are configured (MemoryBuilder::workspace_root); punch out with detect_files = false or configure a root",
        ));
    }
    for root in roots {
        match std::fs::metadata(root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::invalid(
                    "workspace_roots",
                    format!("workspace root {} is not a directory", root.display()),
                ));
            }
            Err(err) => {
                return Err(Error::invalid(
                    "workspace_roots",
                    format!(
                        "workspace root {} does not exist or is unreadable: {err}",
                        root.display()
                    ),
                ));
            }
        }
    }
    let cap = e.opts.limits.max_results;
    let multi = roots.len() > 1;
    let mut count = 0u64;
    let mut files = Vec::new();
    for root in roots {
        let prefix = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let walker = ignore::WalkBuilder::new(root)
            .require_git(false)
            .follow_links(false)
            .hidden(false)
            .git_global(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(|ent| ent.file_name() != ".git")
            .build();
        for ent in walker {
            // Unreadable directories and malformed ignore files are skipped, not fatal.
            let Ok(ent) = ent else { continue };
            if !ent.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let Some(mtime) = ent.metadata().ok().and_then(|m| m.modified().ok()) else {
                continue;
            };
            let ms = system_time_ms(mtime);
            if ms < start_ms || ms > end_ms {
                continue;
            }
            count += 1;
            if files.len() < cap {
                let rel = rel_path(root, ent.path());
                files.push(if multi {
                    format!("{prefix}/{rel}")
                } else {
                    rel
                });
            }
        }
    }
    files.sort();
    Ok((count, files))
}

fn truncate_chars(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn check_text(e: &Engine, field: &str, text: &str, allow_empty: bool) -> Result<()> {
    if !allow_empty && text.trim().is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    let max = e.opts.limits.max_value_bytes;
    if text.len() > max {
        return Err(Error::limit(
            field,
            "size in bytes",
            max as u64,
            text.len() as u64,
        ));
    }
    Ok(())
}

/// Handle on the LLM timesheet (tasks punched in and out). Get it from [`Memory::timesheet`](crate::Memory::timesheet).
#[derive(Debug, Clone)]
pub struct Timesheet {
    pub(crate) scope: Scope,
}

impl Timesheet {
    /// Start a task for `llm_name`. `context` is free text about the task (any
    /// text up to `limits.max_value_bytes`, kept on the task and in its episode);
    /// `namespace` is the Memstrata context the task and its episode belong to
    /// (else the active context).
    pub fn punch_in(
        &self,
        llm_name: &str,
        task_description: &str,
        context: Option<&str>,
        namespace: Option<&str>,
    ) -> Result<PunchIn> {
        let e = &self.scope.engine;
        e.timed("timesheet.punch_in", || {
            input::key(&e.opts.limits, "llm_name", llm_name)?;
            check_text(e, "task_description", task_description, false)?;
            if let Some(text) = context {
                check_text(e, "context", text, true)?;
            }
            let ctx = match namespace {
                Some(c) => {
                    input::context_name("namespace", c)?;
                    c.to_owned()
                }
                None => self.scope.active_context(),
            };
            let now = e.opts.clock.now().timestamp_millis();
            let id = uuid::Uuid::now_v7().to_string();
            let rec = TaskRecord {
                task_id: id.clone(),
                llm_name: llm_name.to_owned(),
                description: task_description.to_owned(),
                context: ctx,
                context_text: context.map(str::to_owned),
                start_time: now,
                end_time: None,
                summary: None,
                duration_seconds: None,
                files_modified: 0,
                files: Vec::new(),
                episode_id: None,
            };
            put_task(e, &rec)?;
            e.after_write()?;
            Ok(PunchIn {
                task_id: id,
                start_time: millis_to_dt(now),
            })
        })
    }

    /// Finish a task: duration from the engine clock, optionally the files modified
    /// under the workspace roots since punch-in; records an episode tagged `task`.
    ///
    /// Unknown task: `NotFound`; already punched out: `Conflict`; a missing workspace
    /// root: `InvalidInput` naming it (the task stays open).
    pub fn punch_out(&self, task_id: &str, summary: &str, detect_files: bool) -> Result<PunchOut> {
        let e = &self.scope.engine;
        e.timed("timesheet.punch_out", || {
            input::key(&e.opts.limits, "task_id", task_id)?;
            check_text(e, "summary", summary, true)?;
            let closed_err = |r: &TaskRecord| {
                Error::Conflict(format!(
                    "task {task_id} was already punched out at {}",
                    millis_to_dt(r.end_time.unwrap_or_default()).to_rfc3339()
                ))
            };
            let rec = load_task(e, task_id)?
                .ok_or_else(|| Error::not_found(format!("task {task_id:?}")))?;
            if rec.end_time.is_some() {
                return Err(closed_err(&rec));
            }
            let end = e.opts.clock.now().timestamp_millis().max(rec.start_time);
            let (files_modified, files) = if detect_files {
                modified_files(e, rec.start_time, end)?
            } else {
                (0, Vec::new())
            };
            let duration_seconds = (end - rec.start_time) as f64 / 1000.0;

            let _g = e.rmw_lock()?;
            let mut rec = load_task(e, task_id)?
                .ok_or_else(|| Error::not_found(format!("task {task_id:?}")))?;
            if rec.end_time.is_some() {
                return Err(closed_err(&rec));
            }
            let episode = NewEpisode::new(truncate_chars(
                &format!("{} finished task: {}", rec.llm_name, rec.description.trim()),
                EPISODE_SUMMARY_CHARS,
            ))
            .content(json!({
                "task_id": task_id,
                "task_description": rec.description,
                "context": rec
                    .context_text
                    .as_deref()
                    .map(|t| truncate_chars(t, EPISODE_CONTEXT_CHARS)),
                "summary": summary,
                "duration_seconds": duration_seconds,
                "files_modified": files_modified,
                "files": files.iter().take(EPISODE_FILES).collect::<Vec<_>>(),
                "start_time": millis_to_dt(rec.start_time),
                "end_time": millis_to_dt(end),
            }))
            .participants([rec.llm_name.clone()])
            .tags(["task"])
            .timestamp(millis_to_dt(end))
            // A task's own record: never skipped or merged into another task's.
            .on_duplicate(OnDuplicate::Keep);
            let episode_id = episodic::record_in(e, &rec.context, episode)?;
            rec.end_time = Some(end);
            rec.summary = Some(summary.to_owned());
            rec.duration_seconds = Some(duration_seconds);
            rec.files_modified = files_modified;
            rec.files = files.clone();
            rec.episode_id = Some(episode_id);
            put_task(e, &rec)?;
            e.after_write()?;
            Ok(PunchOut {
                duration_seconds,
                files_modified,
                files,
            })
        })
    }

    /// The task with `task_id`, or `None`.
    pub fn task(&self, task_id: &str) -> Result<Option<Task>> {
        let e = &self.scope.engine;
        e.timed("timesheet.task", || {
            input::key(&e.opts.limits, "task_id", task_id)?;
            Ok(load_task(e, task_id)?.map(Task::from))
        })
    }

    /// Tasks matching `filter`, newest first.
    pub fn tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>> {
        let e = &self.scope.engine;
        e.timed("timesheet.tasks", || {
            let max = e.opts.limits.max_results;
            let limit = filter.limit.unwrap_or(max);
            if limit == 0 {
                return Err(Error::invalid("limit", "must be at least 1"));
            }
            if limit > max {
                return Err(Error::limit(
                    "limit",
                    "results per call",
                    max as u64,
                    limit as u64,
                ));
            }
            if let Some(c) = &filter.namespace {
                input::context_name("namespace", c)?;
            }
            let (since, until) = period(filter.since, filter.until)?;
            let mut out: Vec<Task> = Vec::new();
            for r in all_tasks(e)? {
                let open = r.end_time.is_none();
                let status_ok = match filter.status {
                    TaskStatusFilter::Open => open,
                    TaskStatusFilter::Closed => !open,
                    TaskStatusFilter::All => true,
                };
                if status_ok
                    && filter.llm_name.as_ref().is_none_or(|n| *n == r.llm_name)
                    && filter.namespace.as_ref().is_none_or(|c| *c == r.context)
                    && r.start_time >= since
                    && r.start_time <= until
                {
                    out.push(r.into());
                }
            }
            out.sort_by(|a, b| {
                b.start_time
                    .cmp(&a.start_time)
                    .then_with(|| b.task_id.cmp(&a.task_id))
            });
            out.truncate(limit);
            Ok(out)
        })
    }

    /// Per-model totals for tasks started in `[since, until]` (either bound optional).
    pub fn report(
        &self,
        since: Option<DateTime<Utc>>,
        until: Option<DateTime<Utc>>,
    ) -> Result<TimesheetReport> {
        let e = &self.scope.engine;
        e.timed("timesheet.report", || {
            let (lo, hi) = period(since, until)?;
            let cap = e.opts.limits.max_results;
            struct Acc {
                tasks: u64,
                open: u64,
                seconds: f64,
                files: BTreeSet<String>,
            }
            let mut per: BTreeMap<String, Acc> = BTreeMap::new();
            let mut tasks = 0u64;
            let mut total = 0.0f64;
            for r in all_tasks(e)? {
                if r.start_time < lo || r.start_time > hi {
                    continue;
                }
                tasks += 1;
                let acc = per.entry(r.llm_name.clone()).or_insert_with(|| Acc {
                    tasks: 0,
                    open: 0,
                    seconds: 0.0,
                    files: BTreeSet::new(),
                });
                acc.tasks += 1;
                match r.duration_seconds {
                    Some(d) if r.end_time.is_some() => {
                        acc.seconds += d;
                        total += d;
                    }
                    _ => acc.open += 1,
                }
                acc.files.extend(r.files);
            }
            Ok(TimesheetReport {
                since,
                until,
                generated_at: e.opts.clock.now(),
                tasks,
                total_seconds: total,
                llms: per
                    .into_iter()
                    .map(|(name, a)| LlmTimesheet {
                        llm_name: name,
                        tasks: a.tasks,
                        open_tasks: a.open,
                        total_seconds: a.seconds,
                        files_modified: a.files.len() as u64,
                        files: a.files.into_iter().take(cap).collect(),
                    })
                    .collect(),
            })
        })
    }
}

fn period(since: Option<DateTime<Utc>>, until: Option<DateTime<Utc>>) -> Result<(i64, i64)> {
    let lo = since.map_or(i64::MIN, |t| t.timestamp_millis());
    let hi = until.map_or(i64::MAX, |t| t.timestamp_millis());
    if lo > hi {
        return Err(Error::invalid("since", "must not be after `until`"));
    }
    Ok((lo, hi))
}

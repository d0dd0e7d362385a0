//! Result records of continuity: sessions and the LLM timesheet, declared with the [`records!`]
//! macro of the parent, with their conversions from the core's types.

#[allow(unused_imports)]
use super::*;

records! {
    /// Result of `session_create`.
    pub struct SessionCreated {
        /// UUIDv7 id of the new session.
        pub session_id: String,
        /// When it was created.
        pub created_at: Timestamp,
    }

    /// Result of `session_save`.
    pub struct SessionSaved {
        /// Always true when returned.
        pub success: bool,
        /// The new version number (1, 2, 3… per session).
        pub version: i64,
        /// When it was saved.
        pub saved_at: Timestamp,
    }

    /// Result of `session_restore`.
    pub struct SessionRestored {
        /// Always true when returned.
        pub success: bool,
        /// The saved content, exactly as saved.
        pub content: JsonValue,
        /// The session's metadata (from `session_create`).
        pub metadata: JsonValue,
        /// The version restored.
        pub version: i64,
    }

    /// One session in `session_list`.
    pub struct SessionInfo {
        /// Session id.
        pub session_id: String,
        /// Name given at creation.
        pub name: String,
        /// Metadata given at creation.
        pub metadata: JsonValue,
        /// Created.
        pub created_at: Timestamp,
        /// Last saved.
        pub updated_at: Timestamp,
        /// Newest version, null before the first save.
        pub latest_version: Option<i64>,
        /// Versions kept.
        pub version_count: i64,
    }

    /// One saved version in `session_versions`.
    pub struct SessionVersionInfo {
        /// Version number.
        pub version: i64,
        /// When it was saved.
        pub saved_at: Timestamp,
        /// Compression level it was saved with (0..=3).
        pub compression_level: u32,
        /// Size of the content as canonical JSON.
        pub raw_bytes: i64,
        /// Bytes stored.
        pub stored_bytes: i64,
    }

    /// Result of `punch_in`.
    pub struct PunchIn {
        /// Always true when returned.
        pub success: bool,
        /// Id of the new task.
        pub task_id: String,
        /// When the task started.
        pub start_time: Timestamp,
    }

    /// Result of `punch_out`.
    pub struct PunchOut {
        /// Always true when returned.
        pub success: bool,
        /// Seconds between punch-in and punch-out.
        pub duration_seconds: f64,
        /// Number of files modified under the workspace roots (0 unless `detect_files`).
        pub files_modified: i64,
        /// Their paths (bounded).
        pub files: Vec<String>,
    }

    /// A timesheet task.
    pub struct Task {
        /// Task id.
        pub task_id: String,
        /// Who worked on it.
        pub llm_name: String,
        /// What it was about.
        pub task_description: String,
        /// Free text given at punch-in as `context` (none given: null).
        pub context: Option<String>,
        /// The Memstrata context (namespace) the task and its episode belong to.
        pub namespace: String,
        /// `"open"` or `"closed"`.
        pub status: String,
        /// Punch-in time.
        pub start_time: Timestamp,
        /// Punch-out time (open: null).
        pub end_time: Option<Timestamp>,
        /// Duration in seconds (open: null).
        pub duration_seconds: Option<f64>,
        /// The punch-out summary (open: null).
        pub summary: Option<String>,
        /// Files modified (punch-out with `detect_files`).
        pub files_modified: i64,
        /// Their paths.
        pub files: Vec<String>,
        /// The episode recorded at punch-out (open: null).
        pub episode_id: Option<String>,
    }

    /// One model's line in a timesheet report.
    pub struct LlmTimesheet {
        /// The model.
        pub llm_name: String,
        /// Tasks in the period.
        pub tasks: i64,
        /// Of which still open.
        pub open_tasks: i64,
        /// Seconds on closed tasks.
        pub total_seconds: f64,
        /// Files modified.
        pub files_modified: i64,
        /// Their paths (bounded).
        pub files: Vec<String>,
    }

    /// Result of `timesheet_report`.
    pub struct TimesheetReport {
        /// Start of the period (null: from the first task).
        pub since: Option<Timestamp>,
        /// End of the period (null: now).
        pub until: Option<Timestamp>,
        /// When the report was made.
        pub generated_at: Timestamp,
        /// Tasks in the period.
        pub tasks: i64,
        /// Seconds on closed tasks.
        pub total_seconds: f64,
        /// One line per model.
        pub llms: Vec<LlmTimesheet>,
    }
}

impl From<memstrata::sessions::SessionCreated> for SessionCreated {
    fn from(c: memstrata::sessions::SessionCreated) -> Self {
        SessionCreated {
            session_id: c.session_id,
            created_at: ts(c.created_at),
        }
    }
}

impl From<memstrata::sessions::SessionSaved> for SessionSaved {
    fn from(s: memstrata::sessions::SessionSaved) -> Self {
        SessionSaved {
            success: true,
            version: int(s.version),
            saved_at: ts(s.saved_at),
        }
    }
}

impl From<memstrata::sessions::SessionRestored> for SessionRestored {
    fn from(r: memstrata::sessions::SessionRestored) -> Self {
        SessionRestored {
            success: true,
            content: JsonValue(r.content),
            metadata: JsonValue(r.metadata),
            version: int(r.version),
        }
    }
}

impl From<memstrata::sessions::SessionInfo> for SessionInfo {
    fn from(s: memstrata::sessions::SessionInfo) -> Self {
        SessionInfo {
            session_id: s.session_id,
            name: s.name,
            metadata: JsonValue(s.metadata),
            created_at: ts(s.created_at),
            updated_at: ts(s.updated_at),
            latest_version: s.latest_version.map(int),
            version_count: int(s.version_count),
        }
    }
}

impl From<memstrata::sessions::SessionVersionInfo> for SessionVersionInfo {
    fn from(v: memstrata::sessions::SessionVersionInfo) -> Self {
        SessionVersionInfo {
            version: int(v.version),
            saved_at: ts(v.saved_at),
            compression_level: u32::from(v.compression_level),
            raw_bytes: int(v.raw_bytes),
            stored_bytes: int(v.stored_bytes),
        }
    }
}

impl From<memstrata::timesheet::PunchIn> for PunchIn {
    fn from(p: memstrata::timesheet::PunchIn) -> Self {
        PunchIn {
            success: true,
            task_id: p.task_id,
            start_time: ts(p.start_time),
        }
    }
}

impl From<memstrata::timesheet::PunchOut> for PunchOut {
    fn from(p: memstrata::timesheet::PunchOut) -> Self {
        PunchOut {
            success: true,
            duration_seconds: p.duration_seconds,
            files_modified: int(p.files_modified),
            files: p.files,
        }
    }
}

impl From<memstrata::timesheet::Task> for Task {
    fn from(t: memstrata::timesheet::Task) -> Self {
        Task {
            task_id: t.task_id,
            llm_name: t.llm_name,
            task_description: t.task_description,
            context: t.context,
            namespace: t.namespace,
            status: match t.status {
                memstrata::timesheet::TaskStatus::Open => "open",
                memstrata::timesheet::TaskStatus::Closed => "closed",
            }
            .to_owned(),
            start_time: ts(t.start_time),
            end_time: opt_ts(t.end_time),
            duration_seconds: t.duration_seconds,
            summary: t.summary,
            files_modified: int(t.files_modified),
            files: t.files,
            episode_id: t.episode_id,
        }
    }
}

impl From<memstrata::timesheet::LlmTimesheet> for LlmTimesheet {
    fn from(l: memstrata::timesheet::LlmTimesheet) -> Self {
        LlmTimesheet {
            llm_name: l.llm_name,
            tasks: int(l.tasks),
            open_tasks: int(l.open_tasks),
            total_seconds: l.total_seconds,
            files_modified: int(l.files_modified),
            files: l.files,
        }
    }
}

impl From<memstrata::timesheet::TimesheetReport> for TimesheetReport {
    fn from(r: memstrata::timesheet::TimesheetReport) -> Self {
        TimesheetReport {
            since: opt_ts(r.since),
            until: opt_ts(r.until),
            generated_at: ts(r.generated_at),
            tasks: int(r.tasks),
            total_seconds: r.total_seconds,
            llms: r.llms.into_iter().map(Into::into).collect(),
        }
    }
}

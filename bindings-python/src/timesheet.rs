//! The LLM timesheet: `punch_in` / `punch_out`, tasks and reports.

use chrono::{DateTime, Utc};
use memstrata_bindings_common::{self as common, TaskFilterOptions};
use pyo3::prelude::*;

use crate::convert;
use crate::error::{run, to_py};
use crate::records::{PyRepr as _, class, classes, py_records};

pub(crate) fn punch_in(
    py: Python<'_>,
    mem: &memstrata::Memory,
    llm_name: String,
    task_description: String,
    context: Option<String>,
    namespace: Option<String>,
) -> PyResult<PunchIn> {
    let p = run(py, || {
        mem.timesheet().punch_in(
            &llm_name,
            &task_description,
            context.as_deref(),
            namespace.as_deref(),
        )
    })?;
    class(py, p)
}

pub(crate) fn punch_out(
    py: Python<'_>,
    mem: &memstrata::Memory,
    task_id: String,
    summary: String,
    detect_files: bool,
) -> PyResult<PunchOut> {
    let p = run(py, || {
        mem.timesheet().punch_out(&task_id, &summary, detect_files)
    })?;
    class(py, p)
}

pub(crate) fn task(
    py: Python<'_>,
    mem: &memstrata::Memory,
    task_id: String,
) -> PyResult<Option<Task>> {
    let t = run(py, || mem.timesheet().task(&task_id))?;
    t.map(|t| class(py, t)).transpose()
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn tasks(
    py: Python<'_>,
    mem: &memstrata::Memory,
    llm_name: Option<String>,
    namespace: Option<String>,
    status: String,
    since: Option<&Bound<'_, PyAny>>,
    until: Option<&Bound<'_, PyAny>>,
    limit: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<Task>> {
    let filter = TaskFilterOptions {
        llm_name,
        namespace,
        status: Some(status),
        since: convert::opt_timestamp(since, "since")?,
        until: convert::opt_timestamp(until, "until")?,
        limit: convert::opt_limit(limit, "limit")?,
    }
    .filter()
    .map_err(to_py)?;
    classes(py, run(py, || mem.timesheet().tasks(&filter))?)
}

pub(crate) fn report(
    py: Python<'_>,
    mem: &memstrata::Memory,
    since: Option<&Bound<'_, PyAny>>,
    until: Option<&Bound<'_, PyAny>>,
) -> PyResult<TimesheetReport> {
    let since = convert::opt_timestamp(since, "since")?.map(Into::into);
    let until = convert::opt_timestamp(until, "until")?.map(Into::into);
    let r = run(py, || mem.timesheet().report(since, until))?;
    class(py, r)
}

py_records! {
    /// Result of `punch_in`.
    PunchIn from common::PunchIn, repr [success, task_id, start_time] {
        /// Always True when returned.
        success: bool,
        /// The new task's id (pass it to punch_out).
        task_id: String,
        /// Punch-in time (aware UTC).
        start_time: DateTime<Utc>,
    }

    /// Result of `punch_out`.
    PunchOut from common::PunchOut, repr [success, duration_seconds, files_modified] {
        /// Always True when returned.
        success: bool,
        /// Seconds between punch-in and punch-out.
        duration_seconds: f64,
        /// Files modified under the workspace roots during the task (exact count).
        files_modified: i64,
        /// Those files (relative to their root).
        files: Vec<String>,
    }

    /// A timesheet task.
    Task from common::Task,
    repr [task_id, llm_name, task_description, status, start_time, end_time] {
        /// Task id.
        task_id: String,
        /// The model that did the work.
        llm_name: String,
        /// What it set out to do.
        task_description: String,
        /// Free text given at punch-in as `context` (None when none was given).
        context: Option<String>,
        /// The Memstrata context (namespace) the task and its episode belong to.
        namespace: String,
        /// "open" or "closed".
        status: String,
        /// Punch-in time (aware UTC).
        start_time: DateTime<Utc>,
        /// Punch-out time.
        end_time: Option<DateTime<Utc>>,
        /// Seconds worked (closed tasks).
        duration_seconds: Option<f64>,
        /// Summary given at punch-out.
        summary: Option<String>,
        /// Files detected at punch-out.
        files_modified: i64,
        /// Those files.
        files: Vec<String>,
        /// The episode recorded at punch-out (tagged "task").
        episode_id: Option<String>,
    }

    /// One model's line in a TimesheetReport.
    LlmTimesheet from common::LlmTimesheet,
    repr [llm_name, tasks, open_tasks, total_seconds, files_modified] {
        /// The model.
        llm_name: String,
        /// Tasks started in the period.
        tasks: i64,
        /// Of which still open.
        open_tasks: i64,
        /// Seconds worked on the closed ones.
        total_seconds: f64,
        /// Distinct files modified across its closed tasks.
        files_modified: i64,
        /// Those files, sorted.
        files: Vec<String>,
    }

    /// Result of `timesheet_report`.
    TimesheetReport from common::TimesheetReport, repr custom {
        /// Start of the period, if bounded.
        since: Option<DateTime<Utc>>,
        /// End of the period, if bounded.
        until: Option<DateTime<Utc>>,
        /// When the report was made.
        generated_at: DateTime<Utc>,
        /// Tasks started in the period.
        tasks: i64,
        /// Seconds worked on closed tasks in the period.
        total_seconds: f64,
        /// One line per model, by name.
        llms: Vec<Py<LlmTimesheet>>,
    }
}

impl TimesheetReport {
    fn repr(&self, py: Python<'_>) -> String {
        format!(
            "TimesheetReport(tasks={}, total_seconds={}, llms=<{} models>, since={}, until={})",
            self.tasks,
            self.total_seconds,
            self.llms.len(),
            self.since.py_repr(py),
            self.until.py_repr(py)
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PunchIn>()?;
    m.add_class::<PunchOut>()?;
    m.add_class::<Task>()?;
    m.add_class::<LlmTimesheet>()?;
    m.add_class::<TimesheetReport>()?;
    Ok(())
}

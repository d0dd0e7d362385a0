//! The LLM timesheet: `punch_in` / `punch_out`, tasks and reports.

use chrono::{DateTime, Utc};
use pyo3::prelude::*;

use crate::convert;
use crate::error::{run, to_py};
use crate::repr::{dt, opt_dt, pystr};

pub(crate) fn punch_in(
    py: Python<'_>,
    mem: &memstrata::Memory,
    llm_name: String,
    task_description: String,
    context: Option<String>,
) -> PyResult<PunchIn> {
    let p = run(py, || {
        mem.punch_in(&llm_name, &task_description, context.as_deref())
    })?;
    Ok(PunchIn {
        success: p.success,
        task_id: p.task_id,
        start_time: p.start_time,
    })
}

pub(crate) fn punch_out(
    py: Python<'_>,
    mem: &memstrata::Memory,
    task_id: String,
    summary: String,
    detect_files: bool,
) -> PyResult<PunchOut> {
    let p = run(py, || mem.punch_out(&task_id, &summary, detect_files))?;
    Ok(PunchOut {
        success: p.success,
        duration_seconds: p.duration_seconds,
        files_modified: p.files_modified,
        files: p.files,
    })
}

pub(crate) fn task(
    py: Python<'_>,
    mem: &memstrata::Memory,
    task_id: String,
) -> PyResult<Option<Task>> {
    Ok(run(py, || mem.task(&task_id))?.map(Task::from))
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn tasks(
    py: Python<'_>,
    mem: &memstrata::Memory,
    llm_name: Option<String>,
    context: Option<String>,
    status: String,
    since: Option<&Bound<'_, PyAny>>,
    until: Option<&Bound<'_, PyAny>>,
    limit: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<Task>> {
    let filter = memstrata::TaskFilter {
        llm_name,
        context,
        status: status.parse().map_err(to_py)?,
        since: convert::opt_datetime(since, "since")?,
        until: convert::opt_datetime(until, "until")?,
        limit: convert::opt_int::<usize>(limit, "limit")?,
    };
    Ok(run(py, || mem.tasks(&filter))?
        .into_iter()
        .map(Task::from)
        .collect())
}

pub(crate) fn report(
    py: Python<'_>,
    mem: &memstrata::Memory,
    since: Option<&Bound<'_, PyAny>>,
    until: Option<&Bound<'_, PyAny>>,
) -> PyResult<TimesheetReport> {
    let since = convert::opt_datetime(since, "since")?;
    let until = convert::opt_datetime(until, "until")?;
    let r = run(py, || mem.timesheet_report(since, until))?;
    Ok(TimesheetReport {
        since: r.since,
        until: r.until,
        generated_at: r.generated_at,
        tasks: r.tasks,
        total_seconds: r.total_seconds,
        llms: r
            .llms
            .into_iter()
            .map(|l| {
                Py::new(
                    py,
                    LlmTimesheet {
                        llm_name: l.llm_name,
                        tasks: l.tasks,
                        open_tasks: l.open_tasks,
                        total_seconds: l.total_seconds,
                        files_modified: l.files_modified,
                        files: l.files,
                    },
                )
            })
            .collect::<PyResult<_>>()?,
    })
}

/// Result of `punch_in`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct PunchIn {
    /// Always True when returned.
    pub success: bool,
    /// The new task's id (pass it to punch_out).
    pub task_id: String,
    /// Punch-in time (aware UTC).
    pub start_time: DateTime<Utc>,
}

#[pymethods]
impl PunchIn {
    fn __repr__(&self) -> String {
        format!(
            "PunchIn(success={}, task_id={}, start_time={})",
            crate::repr::bool(self.success),
            pystr(&self.task_id),
            dt(&self.start_time)
        )
    }
}

/// Result of `punch_out`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct PunchOut {
    /// Always True when returned.
    pub success: bool,
    /// Seconds between punch-in and punch-out.
    pub duration_seconds: f64,
    /// Files modified under the workspace roots during the task (exact count).
    pub files_modified: u64,
    /// Those files (relative to their root).
    pub files: Vec<String>,
}

#[pymethods]
impl PunchOut {
    fn __repr__(&self) -> String {
        format!(
            "PunchOut(success={}, duration_seconds={}, files_modified={})",
            crate::repr::bool(self.success),
            self.duration_seconds,
            self.files_modified
        )
    }
}

/// A timesheet task.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct Task {
    /// Task id.
    pub task_id: String,
    /// The model that did the work.
    pub llm_name: String,
    /// What it set out to do.
    pub task_description: String,
    /// Context the task belongs to.
    pub context: String,
    /// "open" or "closed".
    pub status: String,
    /// Punch-in time (aware UTC).
    pub start_time: DateTime<Utc>,
    /// Punch-out time.
    pub end_time: Option<DateTime<Utc>>,
    /// Seconds worked (closed tasks).
    pub duration_seconds: Option<f64>,
    /// Summary given at punch-out.
    pub summary: Option<String>,
    /// Files detected at punch-out.
    pub files_modified: u64,
    /// Those files.
    pub files: Vec<String>,
    /// The episode recorded at punch-out (tagged "task").
    pub episode_id: Option<String>,
}

impl From<memstrata::Task> for Task {
    fn from(t: memstrata::Task) -> Self {
        Task {
            status: match t.status {
                memstrata::TaskStatus::Open => "open",
                memstrata::TaskStatus::Closed => "closed",
            }
            .to_owned(),
            task_id: t.task_id,
            llm_name: t.llm_name,
            task_description: t.task_description,
            context: t.context,
            start_time: t.start_time,
            end_time: t.end_time,
            duration_seconds: t.duration_seconds,
            summary: t.summary,
            files_modified: t.files_modified,
            files: t.files,
            episode_id: t.episode_id,
        }
    }
}

#[pymethods]
impl Task {
    fn __repr__(&self) -> String {
        format!(
            "Task(task_id={}, llm_name={}, task_description={}, status={}, start_time={}, end_time={})",
            pystr(&self.task_id),
            pystr(&self.llm_name),
            pystr(&self.task_description),
            pystr(&self.status),
            dt(&self.start_time),
            opt_dt(self.end_time.as_ref())
        )
    }
}

/// One model's line in a TimesheetReport.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
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
    /// Those files, sorted.
    pub files: Vec<String>,
}

#[pymethods]
impl LlmTimesheet {
    fn __repr__(&self) -> String {
        format!(
            "LlmTimesheet(llm_name={}, tasks={}, open_tasks={}, total_seconds={}, files_modified={})",
            pystr(&self.llm_name),
            self.tasks,
            self.open_tasks,
            self.total_seconds,
            self.files_modified
        )
    }
}

/// Result of `timesheet_report`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct TimesheetReport {
    /// Start of the period, if bounded.
    pub since: Option<DateTime<Utc>>,
    /// End of the period, if bounded.
    pub until: Option<DateTime<Utc>>,
    /// When the report was made.
    pub generated_at: DateTime<Utc>,
    /// Tasks started in the period.
    pub tasks: u64,
    /// Seconds worked on closed tasks in the period.
    pub total_seconds: f64,
    /// One line per model, by name.
    pub llms: Vec<Py<LlmTimesheet>>,
}

#[pymethods]
impl TimesheetReport {
    fn __repr__(&self) -> String {
        format!(
            "TimesheetReport(tasks={}, total_seconds={}, llms=<{} models>, since={}, until={})",
            self.tasks,
            self.total_seconds,
            self.llms.len(),
            opt_dt(self.since.as_ref()),
            opt_dt(self.until.as_ref())
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

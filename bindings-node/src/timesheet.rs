//! The LLM timesheet: tasks punched in and out per model (methods of `Memory`).

use memstrata_bindings_common::{
    PunchIn, PunchOut, Task, TaskFilterOptions, TimesheetReport, Timestamp, defaults, records,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::memory::Memory;
use crate::task::with;

/// Options of `punchIn`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct PunchInOptions {
    /// Free text about the task (kept on the task and in its episode).
    pub context: Option<String>,
    /// The Memstrata context the task belongs to (default: the active one).
    pub namespace: Option<String>,
}

/// Options of `punchOut`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct PunchOutOptions {
    /// List files modified under the workspace roots since punch-in (default false).
    pub detect_files: Option<bool>,
}

/// Options of `timesheetReport`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct TimeRangeOptions {
    /// Only tasks started at or after this instant.
    pub since: Option<Timestamp>,
    /// Only tasks started at or before this instant.
    pub until: Option<Timestamp>,
}

#[napi]
impl Memory {
    /// Start a task for `llmName`.
    #[napi]
    pub fn punch_in<'env>(
        &self,
        env: &'env Env,
        llm_name: String,
        task_description: String,
        options: Option<PunchInOptions>,
    ) -> Result<PromiseRaw<'env, PunchIn>> {
        let o = options.unwrap_or_default();
        with(env, &self.h, move |m| {
            Ok(m.timesheet()
                .punch_in(
                    &llm_name,
                    &task_description,
                    o.context.as_deref(),
                    o.namespace.as_deref(),
                )?
                .into())
        })
    }

    /// Close a task (`NOT_FOUND` if unknown, `CONFLICT` if already closed).
    #[napi]
    pub fn punch_out<'env>(
        &self,
        env: &'env Env,
        task_id: String,
        summary: String,
        options: Option<PunchOutOptions>,
    ) -> Result<PromiseRaw<'env, PunchOut>> {
        let detect = options
            .and_then(|o| o.detect_files)
            .unwrap_or(defaults::DEFAULT_DETECT_FILES);
        with(env, &self.h, move |m| {
            Ok(m.timesheet().punch_out(&task_id, &summary, detect)?.into())
        })
    }

    /// The task `taskId`, or null.
    #[napi]
    pub fn task<'env>(
        &self,
        env: &'env Env,
        task_id: String,
    ) -> Result<PromiseRaw<'env, Option<Task>>> {
        with(env, &self.h, move |m| {
            Ok(m.timesheet().task(&task_id)?.map(Into::into))
        })
    }

    /// Tasks, newest first, filtered by model, Memstrata context (`namespace`), status (`"open"`, `"closed"`,
    /// `"all"`: default) and start time; at most `limit`.
    #[napi]
    pub fn tasks<'env>(
        &self,
        env: &'env Env,
        options: Option<TaskFilterOptions>,
    ) -> Result<PromiseRaw<'env, Vec<Task>>> {
        let o = options.unwrap_or_default();
        with(env, &self.h, move |m| {
            let filter = o.filter()?;
            Ok(records::list(m.timesheet().tasks(&filter)?))
        })
    }

    /// Time worked per model over tasks started in [since, until].
    #[napi]
    pub fn timesheet_report<'env>(
        &self,
        env: &'env Env,
        options: Option<TimeRangeOptions>,
    ) -> Result<PromiseRaw<'env, TimesheetReport>> {
        let o = options.unwrap_or_default();
        with(env, &self.h, move |m| {
            Ok(m.timesheet()
                .report(o.since.map(|t| t.0), o.until.map(|t| t.0))?
                .into())
        })
    }
}

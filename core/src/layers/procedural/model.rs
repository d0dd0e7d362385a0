//! The data of procedural memory: the public types ([`Step`], [`Procedure`],
//! [`Run`], ...) and the records stored for them.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::clock::millis_to_dt;
use crate::engine::{ActionHandler, Engine};
use crate::{Result, storage::codec};

/// Per-call host actions: action name -> handler. Looked up before the
/// engine-wide actions of [`Procedural::register_action`](super::Procedural::register_action).
pub type Actions = HashMap<String, Arc<dyn ActionHandler>>;

// ---------------------------------------------------------------------------
// Public types

/// One step of a procedure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Unique id within the procedure (a key: non-empty, no NUL).
    pub id: String,
    /// Free text; shown to whoever handles a paused step.
    #[serde(default)]
    pub description: String,
    /// Action name: a built-in (see [`BUILTIN_ACTIONS`](super::BUILTIN_ACTIONS)) or a host action.
    pub action: String,
    /// Parameters (any JSON, default `{}`); strings may hold `{{ expr }}` templates.
    #[serde(default = "empty_object")]
    pub parameters: Value,
    /// Where to go next; `None` ends the run after this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Next>,
}

pub(super) fn empty_object() -> Value {
    Value::Object(Map::new())
}

impl Step {
    /// A step with an id and an action, `{}` parameters and no `next`.
    pub fn new(id: impl Into<String>, action: impl Into<String>) -> Self {
        Step {
            id: id.into(),
            description: String::new(),
            action: action.into(),
            parameters: empty_object(),
            next: None,
        }
    }
    /// Set the description.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
    /// Set the parameters.
    #[must_use]
    pub fn parameters(mut self, parameters: Value) -> Self {
        self.parameters = parameters;
        self
    }
    /// Go to step `next` unconditionally after this one.
    #[must_use]
    pub fn then(mut self, next: impl Into<String>) -> Self {
        self.next = Some(Next::Step(next.into()));
        self
    }
    /// Append a conditional branch (replacing an unconditional `next`).
    #[must_use]
    pub fn branch(mut self, condition: impl Into<String>, next: impl Into<String>) -> Self {
        let b = Branch::new(condition, next);
        match &mut self.next {
            Some(Next::Branches(list)) => list.push(b),
            _ => self.next = Some(Next::Branches(vec![b])),
        }
        self
    }
}

/// The `next` of a step: a step id, or conditional branches tried in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Next {
    /// Always go to this step.
    Step(String),
    /// Go to the `next` of the first branch whose condition is true; none true: end.
    Branches(Vec<Branch>),
}

/// One conditional branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Branch {
    /// CEL expression over `params`, `steps` and `last`; must evaluate to a bool.
    pub condition: String,
    /// Step id to go to when the condition is true.
    pub next: String,
}

impl Branch {
    /// A branch.
    pub fn new(condition: impl Into<String>, next: impl Into<String>) -> Self {
        Branch {
            condition: condition.into(),
            next: next.into(),
        }
    }
}

/// A stored procedure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Procedure {
    /// Name (unique per context).
    pub name: String,
    /// The steps; execution starts at the first.
    pub steps: Vec<Step>,
    /// 1 on `learn`, +1 on every `update`.
    pub version: u64,
    /// When it was learned.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// State of a run. Serializes as `"running"`, `"awaiting_action"`, `"completed"`, `"failed"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Being executed right now by some call (or the process died while it was).
    Running,
    /// Paused on a step whose action has no handler; continue with [`Procedural::resume`](super::Procedural::resume).
    AwaitingAction,
    /// Ended normally.
    Completed,
    /// Ended by a failing step, a bad condition or the step limit; see [`Run::error`].
    Failed,
}

impl RunStatus {
    /// The serialized name.
    pub fn as_str(&self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::AwaitingAction => "awaiting_action",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
        }
    }

    /// Completed or failed.
    pub fn is_finished(&self) -> bool {
        matches!(self, RunStatus::Completed | RunStatus::Failed)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The step a paused run waits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingAction {
    /// Step id.
    pub step: String,
    /// The step's description (what the handler is asked to do).
    pub description: String,
    /// Action name.
    pub action: String,
    /// Resolved parameters.
    pub parameters: Value,
}

/// One executed step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceEntry {
    /// Step id.
    pub step: String,
    /// Action name.
    pub action: String,
    /// Resolved parameters (the raw ones when resolving failed).
    pub parameters: Value,
    /// Output (`null` when the step failed).
    pub output: Value,
    /// Why the step failed, if it did.
    pub error: Option<String>,
    /// When the step finished.
    pub at: DateTime<Utc>,
}

/// A procedure run (what `execute`, `resume` and `run` return).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// UUIDv7 id (global, not per context).
    pub run_id: String,
    /// Procedure name.
    pub procedure: String,
    /// Version of the procedure the run executes (runs keep the steps they started with).
    pub procedure_version: u64,
    /// Context the run's built-in actions operate in.
    pub context: String,
    /// State.
    pub status: RunStatus,
    /// The `params` given to `execute`.
    pub params: Value,
    /// Output of each executed step, by step id (the latest when a step ran more than once).
    pub outputs: Map<String, Value>,
    /// Every executed step, in order.
    pub trace: Vec<TraceEntry>,
    /// The step awaited when `status` is `awaiting_action`.
    pub pending: Option<PendingAction>,
    /// Why the run failed.
    pub error: Option<String>,
    /// Steps started so far (counted against `Limits::max_steps`).
    pub steps_executed: u64,
    /// Id of the episode recorded when the run finished.
    pub episode_id: Option<String>,
    /// When `execute` was called.
    pub started_at: DateTime<Utc>,
    /// When it completed or failed.
    pub finished_at: Option<DateTime<Utc>>,
}

// ---------------------------------------------------------------------------
// Stored records

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct ProcedureRecord {
    pub(super) steps: Vec<Step>,
    pub(super) version: u64,
    pub(super) created_at: i64,
    pub(super) updated_at: i64,
}

/// Run header, stored under `run_id` in the `runs` tree. Trace entries are
/// stored separately under `run_id 0x00 seq(u64 BE)`, so a step appends one
/// entry instead of rewriting the whole trace.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct RunRecord {
    pub(super) run_id: String,
    pub(super) procedure: String,
    pub(super) procedure_version: u64,
    pub(super) context: String,
    pub(super) status: RunStatus,
    pub(super) params: Value,
    pub(super) outputs: Map<String, Value>,
    pub(super) pending: Option<PendingAction>,
    pub(super) error: Option<String>,
    pub(super) started_at: i64,
    pub(super) finished_at: Option<i64>,
    /// Snapshot of the procedure's steps at `execute`.
    pub(super) steps: Vec<Step>,
    /// Step to run next (running) or the awaited step (awaiting_action).
    pub(super) cursor: Option<String>,
    pub(super) executed: u64,
    pub(super) last: Value,
    pub(super) episode_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct TraceRecord {
    pub(super) step: String,
    pub(super) action: String,
    pub(super) parameters: Value,
    pub(super) output: Value,
    pub(super) error: Option<String>,
    pub(super) at: i64,
}

impl From<TraceRecord> for TraceEntry {
    fn from(t: TraceRecord) -> Self {
        TraceEntry {
            step: t.step,
            action: t.action,
            parameters: t.parameters,
            output: t.output,
            error: t.error,
            at: millis_to_dt(t.at),
        }
    }
}

pub(super) fn trace_prefix(run_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(run_id.len() + 9);
    k.extend_from_slice(run_id.as_bytes());
    k.push(0);
    k
}

pub(super) fn trace_key(run_id: &str, seq: u64) -> Vec<u8> {
    let mut k = trace_prefix(run_id);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

pub(super) fn load_procedure(e: &Engine, ctx: &str, name: &str) -> Result<Option<ProcedureRecord>> {
    match e.t.procedures.get(codec::ctx_key(ctx, name))? {
        Some(v) => Ok(Some(e.codec.decode(&v)?)),
        None => Ok(None),
    }
}

pub(super) fn to_procedure(name: &str, r: ProcedureRecord) -> Procedure {
    Procedure {
        name: name.to_owned(),
        steps: r.steps,
        version: r.version,
        created_at: millis_to_dt(r.created_at),
        updated_at: millis_to_dt(r.updated_at),
    }
}

pub(super) fn load_run_header(e: &Engine, run_id: &str) -> Result<Option<RunRecord>> {
    match e.t.runs.get(run_id.as_bytes())? {
        Some(v) => Ok(Some(e.codec.decode(&v)?)),
        None => Ok(None),
    }
}

pub(super) fn load_trace(e: &Engine, run_id: &str) -> Result<Vec<TraceRecord>> {
    let mut out = Vec::new();
    for item in e.t.runs.scan_prefix(trace_prefix(run_id)) {
        let (_, v) = item?;
        out.push(e.codec.decode(&v)?);
    }
    Ok(out)
}

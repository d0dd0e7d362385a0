//! Procedural memory: named step graphs ("procedures") that the engine executes.
//!
//! A procedure is a list of [`Step`]s. Execution starts at the first step,
//! resolves the step's parameter templates (`{{ expr }}`, CEL), runs its action
//! (a built-in memory action, a host action, or — when nothing handles the
//! action — a pause waiting for [`Procedural::resume`]), stores the output and
//! follows `next`. Runs are persisted after every step, so a paused run
//! survives a restart. See `docs/procedures.md` for the user-facing contract.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::clock::millis_to_dt;
use crate::engine::{ActionHandler, Engine};
use crate::episodic::{self, NewEpisode, SearchFilters};
use crate::{Error, Memory, Result, codec, semantic, short_term, validate, working};

/// Per-call host actions: action name -> handler. Looked up before the
/// engine-wide actions of [`Procedural::register_action`].
pub type Actions = HashMap<String, Arc<dyn ActionHandler>>;

/// Names of the built-in actions. They are reserved: host actions may not use them.
pub const BUILTIN_ACTIONS: &[&str] = &[
    "set",
    "fail",
    "short_term.store",
    "short_term.retrieve",
    "episodic.record",
    "episodic.search",
    "semantic.store",
    "semantic.retrieve",
    "working.focus",
    "workspace.add",
];

/// Longest CEL expression (a branch condition or one `{{ }}` template), in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 1024;

/// Tag of the episode recorded for every finished run.
pub const PROCEDURE_TAG: &str = "procedure";

/// Default `limit` of the `episodic.search` built-in.
const DEFAULT_SEARCH_LIMIT: usize = 10;

/// Stack of the thread CEL parsing and evaluation run on. The `cel` parser
/// (ANTLR) recurses deeply — an unoptimised build overflows a 2 MiB stack on
/// ~16 nested parentheses — so expressions never run on the caller's stack.
/// This is address space reserved, not memory committed.
const CEL_STACK_BYTES: usize = 64 * 1024 * 1024;

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
    /// Action name: a built-in (see [`BUILTIN_ACTIONS`]) or a host action.
    pub action: String,
    /// Parameters (any JSON, default `{}`); strings may hold `{{ expr }}` templates.
    #[serde(default = "empty_object")]
    pub parameters: Value,
    /// Where to go next; `None` ends the run after this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Next>,
}

fn empty_object() -> Value {
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
    /// Paused on a step whose action has no handler; continue with [`Procedural::resume`].
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

/// Handle on the procedural layer of the active context. Get it from [`Memory::procedural`].
#[derive(Debug, Clone)]
pub struct Procedural {
    pub(crate) mem: Memory,
}

impl Memory {
    /// Procedural layer of the active context.
    pub fn procedural(&self) -> Procedural {
        Procedural { mem: self.clone() }
    }
}

// ---------------------------------------------------------------------------
// Stored records

#[derive(Debug, Serialize, Deserialize)]
struct ProcedureRecord {
    steps: Vec<Step>,
    version: u64,
    created_at: i64,
    updated_at: i64,
}

/// Run header, stored under `run_id` in the `runs` tree. Trace entries are
/// stored separately under `run_id 0x00 seq(u64 BE)`, so a step appends one
/// entry instead of rewriting the whole trace.
#[derive(Debug, Serialize, Deserialize)]
struct RunRecord {
    run_id: String,
    procedure: String,
    procedure_version: u64,
    context: String,
    status: RunStatus,
    params: Value,
    outputs: Map<String, Value>,
    pending: Option<PendingAction>,
    error: Option<String>,
    started_at: i64,
    finished_at: Option<i64>,
    /// Snapshot of the procedure's steps at `execute`.
    steps: Vec<Step>,
    /// Step to run next (running) or the awaited step (awaiting_action).
    cursor: Option<String>,
    executed: u64,
    last: Value,
    episode_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct TraceRecord {
    step: String,
    action: String,
    parameters: Value,
    output: Value,
    error: Option<String>,
    at: i64,
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

fn trace_prefix(run_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(run_id.len() + 9);
    k.extend_from_slice(run_id.as_bytes());
    k.push(0);
    k
}

fn trace_key(run_id: &str, seq: u64) -> Vec<u8> {
    let mut k = trace_prefix(run_id);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

fn load_procedure(e: &Engine, ctx: &str, name: &str) -> Result<Option<ProcedureRecord>> {
    match e.t.procedures.get(codec::ctx_key(ctx, name))? {
        Some(v) => Ok(Some(codec::decode(&v)?)),
        None => Ok(None),
    }
}

fn to_procedure(name: &str, r: ProcedureRecord) -> Procedure {
    Procedure {
        name: name.to_owned(),
        steps: r.steps,
        version: r.version,
        created_at: millis_to_dt(r.created_at),
        updated_at: millis_to_dt(r.updated_at),
    }
}

fn load_run_header(e: &Engine, run_id: &str) -> Result<Option<RunRecord>> {
    match e.t.runs.get(run_id.as_bytes())? {
        Some(v) => Ok(Some(codec::decode(&v)?)),
        None => Ok(None),
    }
}

fn load_trace(e: &Engine, run_id: &str) -> Result<Vec<TraceRecord>> {
    let mut out = Vec::new();
    for item in e.t.runs.scan_prefix(trace_prefix(run_id)) {
        let (_, v) = item?;
        out.push(codec::decode(&v)?);
    }
    Ok(out)
}

/// A run being executed: the header, the full trace and how much of it is on disk.
struct Exec {
    rec: RunRecord,
    trace: Vec<TraceRecord>,
    saved: usize,
}

impl Exec {
    /// Write the header and the unsaved trace entries atomically.
    fn save(&mut self, e: &Engine) -> Result<()> {
        let mut batch = sled::Batch::default();
        for (i, t) in self.trace.iter().enumerate().skip(self.saved) {
            batch.insert(trace_key(&self.rec.run_id, i as u64), codec::encode(t)?);
        }
        batch.insert(self.rec.run_id.as_bytes(), codec::encode(&self.rec)?);
        e.t.runs.apply_batch(batch)?;
        e.after_write()?;
        self.saved = self.trace.len();
        Ok(())
    }

    fn to_public(&self) -> Run {
        let r = &self.rec;
        Run {
            run_id: r.run_id.clone(),
            procedure: r.procedure.clone(),
            procedure_version: r.procedure_version,
            context: r.context.clone(),
            status: r.status,
            params: r.params.clone(),
            outputs: r.outputs.clone(),
            trace: self.trace.iter().cloned().map(TraceEntry::from).collect(),
            pending: r.pending.clone(),
            error: r.error.clone(),
            steps_executed: r.executed,
            episode_id: r.episode_id.clone(),
            started_at: millis_to_dt(r.started_at),
            finished_at: r.finished_at.map(millis_to_dt),
        }
    }
}

// ---------------------------------------------------------------------------
// The public API

impl Procedural {
    /// Store a new procedure. Validates the graph (see `docs/procedures.md`);
    /// `Conflict` when `name` already exists in this context (use [`Procedural::update`]).
    pub fn learn(&self, name: &str, steps: Vec<Step>) -> Result<Procedure> {
        let e = &self.mem.engine;
        e.timed("procedural.learn", || {
            validate::key(&e.opts.limits, "name", name)?;
            validate_steps(e, &steps)?;
            let ctx = self.mem.active_ctx();
            let key = codec::ctx_key(&ctx, name);
            let now = e.opts.clock.now().timestamp_millis();
            let rec = ProcedureRecord {
                steps,
                version: 1,
                created_at: now,
                updated_at: now,
            };
            let enc = codec::encode(&rec)?;
            e.touch_context(&ctx)?;
            {
                let _g = e.rmw.lock();
                if e.t.procedures.contains_key(&key)? {
                    return Err(Error::Conflict(format!(
                        "procedure {name:?} already exists in context {ctx:?}; use update to change it"
                    )));
                }
                e.t.procedures.insert(key, enc)?;
            }
            e.after_write()?;
            Ok(to_procedure(name, rec))
        })
    }

    /// Replace the steps of an existing procedure (`NotFound` otherwise); bumps its version.
    /// Runs already started keep the steps they started with.
    pub fn update(&self, name: &str, steps: Vec<Step>) -> Result<Procedure> {
        let e = &self.mem.engine;
        e.timed("procedural.update", || {
            validate::key(&e.opts.limits, "name", name)?;
            validate_steps(e, &steps)?;
            let ctx = self.mem.active_ctx();
            let key = codec::ctx_key(&ctx, name);
            let rec = {
                let _g = e.rmw.lock();
                let Some(cur) = load_procedure(e, &ctx, name)? else {
                    return Err(Error::not_found(format!(
                        "procedure {name:?} in context {ctx:?}"
                    )));
                };
                let rec = ProcedureRecord {
                    steps,
                    version: cur.version + 1,
                    created_at: cur.created_at,
                    updated_at: e.opts.clock.now().timestamp_millis(),
                };
                e.t.procedures.insert(key, codec::encode(&rec)?)?;
                rec
            };
            e.after_write()?;
            Ok(to_procedure(name, rec))
        })
    }

    /// The procedure `name`, or `None`.
    pub fn get(&self, name: &str) -> Result<Option<Procedure>> {
        let e = &self.mem.engine;
        e.timed("procedural.get", || {
            validate::key(&e.opts.limits, "name", name)?;
            Ok(load_procedure(e, &self.mem.active_ctx(), name)?.map(|r| to_procedure(name, r)))
        })
    }

    /// Names of the procedures of this context, sorted.
    pub fn list(&self) -> Result<Vec<String>> {
        let e = &self.mem.engine;
        e.timed("procedural.list", || {
            let mut out = Vec::new();
            for k in
                e.t.procedures
                    .scan_prefix(codec::ctx_prefix(&self.mem.active_ctx()))
                    .keys()
            {
                out.push(codec::split_ctx_key(&k?)?.1);
            }
            Ok(out)
        })
    }

    /// Delete a procedure; `true` when it existed. Its runs are kept.
    pub fn forget(&self, name: &str) -> Result<bool> {
        let e = &self.mem.engine;
        e.timed("procedural.forget", || {
            validate::key(&e.opts.limits, "name", name)?;
            let old = {
                let _g = e.rmw.lock();
                e.t.procedures
                    .remove(codec::ctx_key(&self.mem.active_ctx(), name))?
            };
            e.after_write()?;
            Ok(old.is_some())
        })
    }

    /// Run procedure `name` with `params` (a JSON object, or null for `{}`).
    ///
    /// Returns the run when it completes, fails or pauses on a step no handler
    /// takes. A failing step is `Ok(Run { status: Failed, .. })`, not `Err`;
    /// `Err` is for an unknown procedure, bad arguments or a storage failure.
    pub fn execute(&self, name: &str, params: Value, actions: &Actions) -> Result<Run> {
        let e = &self.mem.engine;
        e.timed("procedural.execute", || {
            validate::key(&e.opts.limits, "name", name)?;
            check_actions(e, actions)?;
            let params = match params {
                Value::Null => empty_object(),
                p @ Value::Object(_) => p,
                other => {
                    return Err(Error::invalid(
                        "params",
                        format!("must be a JSON object (or null), got {}", json_type(&other)),
                    ));
                }
            };
            validate::value(&e.opts.limits, "params", &params)?;
            let ctx = self.mem.active_ctx();
            let Some(proc_rec) = load_procedure(e, &ctx, name)? else {
                return Err(Error::not_found(format!(
                    "procedure {name:?} in context {ctx:?}"
                )));
            };
            let rec = RunRecord {
                run_id: uuid::Uuid::now_v7().to_string(),
                procedure: name.to_owned(),
                procedure_version: proc_rec.version,
                context: ctx.to_string(),
                status: RunStatus::Running,
                params,
                outputs: Map::new(),
                pending: None,
                error: None,
                started_at: e.opts.clock.now().timestamp_millis(),
                finished_at: None,
                cursor: proc_rec.steps.first().map(|s| s.id.clone()),
                steps: proc_rec.steps,
                executed: 0,
                last: Value::Null,
                episode_id: None,
            };
            let mut ex = Exec {
                rec,
                trace: Vec::new(),
                saved: 0,
            };
            ex.save(e)?;
            drive(e, &mut ex, actions, None)?;
            Ok(ex.to_public())
        })
    }

    /// Continue a run paused on a step: `output` becomes that step's output,
    /// then execution goes on. `NotFound` for an unknown run, `Conflict` when
    /// the run is not awaiting an action. Runs are global: the run continues in
    /// the context it started in, whatever this handle's context.
    pub fn resume(&self, run_id: &str, output: Value, actions: &Actions) -> Result<Run> {
        let e = &self.mem.engine;
        e.timed("procedural.resume", || {
            validate::key(&e.opts.limits, "run_id", run_id)?;
            validate::value(&e.opts.limits, "output", &output)?;
            check_actions(e, actions)?;
            let (mut ex, idx) = {
                let _g = e.rmw.lock();
                let Some(mut rec) = load_run_header(e, run_id)? else {
                    return Err(Error::not_found(format!("run {run_id:?}")));
                };
                if rec.status != RunStatus::AwaitingAction {
                    return Err(Error::Conflict(format!(
                        "run {run_id} is {}, not awaiting an action",
                        rec.status
                    )));
                }
                let Some(pending) = rec.pending.take() else {
                    return Err(Error::corrupted(format!(
                        "run {run_id} awaits an action but has no pending step"
                    )));
                };
                let Some(idx) = rec.steps.iter().position(|s| s.id == pending.step) else {
                    return Err(Error::corrupted(format!(
                        "run {run_id} awaits unknown step {:?}",
                        pending.step
                    )));
                };
                let trace = load_trace(e, run_id)?;
                rec.status = RunStatus::Running;
                rec.outputs.insert(pending.step.clone(), output.clone());
                rec.last = output.clone();
                let saved = trace.len();
                let mut ex = Exec { rec, trace, saved };
                ex.trace.push(TraceRecord {
                    step: pending.step,
                    action: pending.action,
                    parameters: pending.parameters,
                    output,
                    error: None,
                    at: e.opts.clock.now().timestamp_millis(),
                });
                ex.save(e)?;
                (ex, idx)
            };
            drive(e, &mut ex, actions, Some(idx))?;
            Ok(ex.to_public())
        })
    }

    /// The run `run_id` (any context), or `None`.
    pub fn run(&self, run_id: &str) -> Result<Option<Run>> {
        let e = &self.mem.engine;
        e.timed("procedural.run", || {
            validate::key(&e.opts.limits, "run_id", run_id)?;
            let Some(rec) = load_run_header(e, run_id)? else {
                return Ok(None);
            };
            let trace = load_trace(e, run_id)?;
            let saved = trace.len();
            Ok(Some(Exec { rec, trace, saved }.to_public()))
        })
    }

    /// Register a host action engine-wide (every handle, every context), replacing
    /// any previous handler of that name. Built-in names are refused.
    pub fn register_action(&self, name: &str, handler: Arc<dyn ActionHandler>) -> Result<()> {
        let e = &self.mem.engine;
        validate::key(&e.opts.limits, "name", name)?;
        if is_builtin(name) {
            return Err(Error::invalid(
                "name",
                format!("{name:?} is a built-in action and cannot be replaced"),
            ));
        }
        e.actions.write().insert(name.to_owned(), handler);
        Ok(())
    }

    /// Remove an engine-wide host action; `true` when it was registered.
    pub fn unregister_action(&self, name: &str) -> bool {
        self.mem.engine.actions.write().remove(name).is_some()
    }

    /// Names of the engine-wide host actions, sorted.
    pub fn registered_actions(&self) -> Vec<String> {
        let mut v: Vec<String> = self.mem.engine.actions.read().keys().cloned().collect();
        v.sort();
        v
    }
}

fn is_builtin(action: &str) -> bool {
    BUILTIN_ACTIONS.contains(&action)
}

fn check_actions(e: &Engine, actions: &Actions) -> Result<()> {
    for name in actions.keys() {
        validate::key(&e.opts.limits, "actions", name)?;
        if is_builtin(name) {
            return Err(Error::invalid(
                "actions",
                format!("{name:?} is a built-in action and cannot be replaced by a host action"),
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Parsing and validation

/// Parse steps from JSON (what bindings and MCP receive): an array of
/// `{id, description?, action, parameters?, next?}`. Errors name the field,
/// e.g. `steps[2].next[0].condition`. Graph checks happen in `learn`/`update`.
pub fn steps_from_json(value: Value) -> Result<Vec<Step>> {
    let Value::Array(items) = value else {
        return Err(Error::invalid(
            "steps",
            format!("must be a JSON array of steps, got {}", json_type(&value)),
        ));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| step_from_json(i, item))
        .collect()
}

fn step_from_json(i: usize, item: Value) -> Result<Step> {
    let field = |name: &str| format!("steps[{i}].{name}");
    let Value::Object(mut m) = item else {
        return Err(Error::invalid(
            format!("steps[{i}]"),
            format!("must be a JSON object, got {}", json_type(&item)),
        ));
    };
    if let Some(k) = m.keys().find(|k| {
        !matches!(
            k.as_str(),
            "id" | "description" | "action" | "parameters" | "next"
        )
    }) {
        return Err(Error::invalid(
            field(k),
            "unknown field (a step has id, description, action, parameters, next)",
        ));
    }
    let id = required_string(m.remove("id"), &field("id"))?;
    let description = match m.remove("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(Error::invalid(
                field("description"),
                format!("must be a string, got {}", json_type(&other)),
            ));
        }
    };
    let action = required_string(m.remove("action"), &field("action"))?;
    let parameters = match m.remove("parameters") {
        None | Some(Value::Null) => empty_object(),
        Some(p) => p,
    };
    let next = match m.remove("next") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(Next::Step(s)),
        Some(Value::Array(branches)) => {
            let mut out = Vec::with_capacity(branches.len());
            for (j, b) in branches.into_iter().enumerate() {
                let bfield = |name: &str| format!("steps[{i}].next[{j}].{name}");
                let Value::Object(mut bm) = b else {
                    return Err(Error::invalid(
                        format!("steps[{i}].next[{j}]"),
                        format!(
                            "a branch must be an object {{condition, next}}, got {}",
                            json_type(&b)
                        ),
                    ));
                };
                if let Some(k) = bm
                    .keys()
                    .find(|k| !matches!(k.as_str(), "condition" | "next"))
                {
                    return Err(Error::invalid(
                        bfield(k),
                        "unknown field (a branch has condition, next)",
                    ));
                }
                let condition = required_string(bm.remove("condition"), &bfield("condition"))?;
                let next = required_string(bm.remove("next"), &bfield("next"))?;
                out.push(Branch { condition, next });
            }
            Some(Next::Branches(out))
        }
        Some(other) => {
            return Err(Error::invalid(
                field("next"),
                format!(
                    "must be a step id, a list of {{condition, next}} branches, or absent; got {}",
                    json_type(&other)
                ),
            ));
        }
    };
    Ok(Step {
        id,
        description,
        action,
        parameters,
        next,
    })
}

fn required_string(v: Option<Value>, field: &str) -> Result<String> {
    match v {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(Error::invalid(field, "is required")),
        Some(other) => Err(Error::invalid(
            field,
            format!("must be a string, got {}", json_type(&other)),
        )),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An expression to compile during validation: field, owning step id, what it is, source.
struct ExprCheck<'a> {
    field: String,
    step: &'a str,
    what: &'static str,
    src: &'a str,
}

fn check_expr_size(field: &str, src: &str) -> Result<()> {
    if src.len() > MAX_EXPRESSION_BYTES {
        return Err(Error::limit(
            field,
            "expression size in bytes",
            MAX_EXPRESSION_BYTES as u64,
            src.len() as u64,
        ));
    }
    Ok(())
}

/// The graph checks of `learn` / `update`.
fn validate_steps(e: &Engine, steps: &[Step]) -> Result<()> {
    let lim = &e.opts.limits;
    if steps.is_empty() {
        return Err(Error::invalid(
            "steps",
            "a procedure needs at least one step",
        ));
    }
    if steps.len() > lim.max_procedure_steps {
        return Err(Error::limit(
            "steps",
            "steps in one procedure (Limits::max_procedure_steps)",
            lim.max_procedure_steps as u64,
            steps.len() as u64,
        ));
    }
    let mut ids: HashMap<&str, usize> = HashMap::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        validate::key(lim, &format!("steps[{i}].id"), &s.id)?;
        if let Some(j) = ids.insert(s.id.as_str(), i) {
            return Err(Error::invalid(
                format!("steps[{i}].id"),
                format!("duplicate step id {:?} (already used by steps[{j}])", s.id),
            ));
        }
        validate::key(lim, &format!("steps[{i}].action"), &s.action)?;
        if s.description.len() > lim.max_value_bytes {
            return Err(Error::limit(
                format!("steps[{i}].description"),
                "size in bytes",
                lim.max_value_bytes as u64,
                s.description.len() as u64,
            ));
        }
        validate::value(lim, &format!("steps[{i}].parameters"), &s.parameters)?;
    }
    let mut exprs: Vec<ExprCheck<'_>> = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        match &s.next {
            None => {}
            Some(Next::Step(target)) if !ids.contains_key(target.as_str()) => {
                return Err(Error::invalid(
                    format!("steps[{i}].next"),
                    format!("step {:?} goes to unknown step {target:?}", s.id),
                ));
            }
            Some(Next::Step(_)) => {}
            Some(Next::Branches(branches)) => {
                for (j, b) in branches.iter().enumerate() {
                    let cfield = format!("steps[{i}].next[{j}].condition");
                    if b.condition.trim().is_empty() {
                        return Err(Error::invalid(
                            cfield,
                            format!("step {:?}: condition must not be empty", s.id),
                        ));
                    }
                    check_expr_size(&cfield, &b.condition)?;
                    if !ids.contains_key(b.next.as_str()) {
                        return Err(Error::invalid(
                            format!("steps[{i}].next[{j}].next"),
                            format!("step {:?} branches to unknown step {:?}", s.id, b.next),
                        ));
                    }
                    exprs.push(ExprCheck {
                        field: cfield,
                        step: &s.id,
                        what: "condition",
                        src: &b.condition,
                    });
                }
            }
        }
        // Templates in parameters, walked iteratively with their paths.
        let mut stack: Vec<(String, &Value)> =
            vec![(format!("steps[{i}].parameters"), &s.parameters)];
        while let Some((path, v)) = stack.pop() {
            match v {
                Value::String(text) => {
                    let segs = parse_template(text).map_err(|reason| {
                        Error::invalid(path.clone(), format!("step {:?}: {reason}", s.id))
                    })?;
                    for seg in segs {
                        if let Seg::Expr(src) = seg {
                            check_expr_size(&path, src)?;
                            exprs.push(ExprCheck {
                                field: path.clone(),
                                step: &s.id,
                                what: "template",
                                src,
                            });
                        }
                    }
                }
                Value::Array(a) => {
                    for (j, x) in a.iter().enumerate().rev() {
                        stack.push((format!("{path}[{j}]"), x));
                    }
                }
                Value::Object(o) => {
                    for (k, x) in o.iter().rev() {
                        stack.push((format!("{path}.{k}"), x));
                    }
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
    }
    if exprs.is_empty() {
        return Ok(());
    }
    let bad = on_cel_stack(|| {
        for x in &exprs {
            if let Err(err) = cel::Program::compile(x.src) {
                return Some((
                    x.field.clone(),
                    format!(
                        "step {:?}: {} `{}` does not compile: {}",
                        x.step,
                        x.what,
                        x.src,
                        one_line(&err.to_string())
                    ),
                ));
            }
        }
        None
    })
    .map_err(Error::Procedure)?;
    match bad {
        Some((field, reason)) => Err(Error::invalid(field, reason)),
        None => Ok(()),
    }
}

fn one_line(s: &str) -> String {
    s.split('\n')
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------
// Templates and CEL

/// A piece of a template string.
#[derive(Debug, PartialEq)]
enum Seg<'a> {
    Text(&'a str),
    Expr(&'a str),
}

/// Split `s` into text and `{{ expr }}` pieces.
fn parse_template(s: &str) -> std::result::Result<Vec<Seg<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            out.push(Seg::Text(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(
                "unterminated `{{` in template (for a literal `{{` write `{{ \"{{\" }}`)"
                    .to_owned(),
            );
        };
        let expr = after[..end].trim();
        if expr.is_empty() {
            return Err("empty `{{ }}` template expression".to_owned());
        }
        out.push(Seg::Expr(expr));
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
        out.push(Seg::Text(rest));
    }
    Ok(out)
}

fn has_template(v: &Value) -> bool {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if s.contains("{{") => return true,
            Value::Array(a) => stack.extend(a.iter()),
            Value::Object(o) => stack.extend(o.values()),
            _ => {}
        }
    }
    false
}

/// What expressions see.
struct Vars<'a> {
    params: &'a Value,
    outputs: &'a Map<String, Value>,
    last: &'a Value,
}

/// Run `f` on a helper thread with a large stack (see [`CEL_STACK_BYTES`]); a
/// panic inside it becomes an error message.
fn on_cel_stack<R: Send>(f: impl FnOnce() -> R + Send) -> std::result::Result<R, String> {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("memstrata-cel".into())
            .stack_size(CEL_STACK_BYTES)
            .spawn_scoped(s, f)
            .map_err(|e| format!("cannot start the expression thread: {e}"))?;
        handle.join().map_err(|p| {
            format!(
                "expression evaluator panicked: {}",
                panic_message(p.as_ref())
            )
        })
    })
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_owned()
    }
}

fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                cel::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                cel::Value::UInt(u)
            } else {
                cel::Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(o) => {
            let m: HashMap<String, cel::Value> =
                o.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::from(m)
        }
    }
}

/// Evaluates expressions against one set of variables. Lives on the CEL thread.
struct Evaluator<'a> {
    vars: &'a Vars<'a>,
    ctx: Option<cel::Context<'static, 'static>>,
}

impl<'a> Evaluator<'a> {
    fn new(vars: &'a Vars<'a>) -> Self {
        Evaluator { vars, ctx: None }
    }

    fn context(&mut self) -> &cel::Context<'static, 'static> {
        let vars = self.vars;
        self.ctx.get_or_insert_with(|| {
            let mut c = cel::Context::default();
            c.add_variable_from_value("params", to_cel(vars.params));
            c.add_variable_from_value("last", to_cel(vars.last));
            let steps: HashMap<String, cel::Value> = vars
                .outputs
                .iter()
                .map(|(id, out)| {
                    let entry: HashMap<String, cel::Value> =
                        HashMap::from([("output".to_owned(), to_cel(out))]);
                    (id.clone(), cel::Value::from(entry))
                })
                .collect();
            c.add_variable_from_value("steps", cel::Value::from(steps));
            c
        })
    }

    fn eval(&mut self, src: &str) -> std::result::Result<cel::Value, String> {
        if src.len() > MAX_EXPRESSION_BYTES {
            return Err(format!(
                "expression longer than {MAX_EXPRESSION_BYTES} bytes"
            ));
        }
        let program = cel::Program::compile(src)
            .map_err(|e| format!("does not compile: {}", one_line(&e.to_string())))?;
        program.execute(self.context()).map_err(|e| e.to_string())
    }

    fn eval_json(&mut self, src: &str) -> std::result::Result<Value, String> {
        let v = self.eval(src)?;
        v.json()
            .map_err(|e| format!("result cannot be converted to JSON: {e}"))
    }

    /// Resolve every template in `v`; `path` names the value in errors.
    fn resolve(&mut self, v: &Value, path: &str) -> std::result::Result<Value, String> {
        Ok(match v {
            Value::String(s) if s.contains("{{") => {
                let segs = parse_template(s).map_err(|e| format!("{path}: {e}"))?;
                if let [Seg::Expr(src)] = segs.as_slice() {
                    self.eval_json(src)
                        .map_err(|e| format!("{path}: template `{{{{ {src} }}}}`: {e}"))?
                } else {
                    let mut out = String::with_capacity(s.len());
                    for seg in segs {
                        match seg {
                            Seg::Text(t) => out.push_str(t),
                            Seg::Expr(src) => {
                                let v = self.eval_json(src).map_err(|e| {
                                    format!("{path}: template `{{{{ {src} }}}}`: {e}")
                                })?;
                                match v {
                                    Value::String(s) => out.push_str(&s),
                                    other => out.push_str(&other.to_string()),
                                }
                            }
                        }
                    }
                    Value::String(out)
                }
            }
            Value::Array(a) => Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, x)| self.resolve(x, &format!("{path}[{i}]")))
                    .collect::<std::result::Result<_, _>>()?,
            ),
            Value::Object(o) => {
                let mut m = Map::with_capacity(o.len());
                for (k, x) in o {
                    m.insert(k.clone(), self.resolve(x, &format!("{path}.{k}"))?);
                }
                Value::Object(m)
            }
            other => other.clone(),
        })
    }
}

fn resolve_parameters(parameters: &Value, vars: &Vars<'_>) -> std::result::Result<Value, String> {
    if !has_template(parameters) {
        return Ok(parameters.clone());
    }
    on_cel_stack(|| Evaluator::new(vars).resolve(parameters, "parameters"))?
}

/// The next step after a step whose `next` is `branches`: the first true condition wins.
fn choose_branch(
    branches: &[Branch],
    vars: &Vars<'_>,
) -> std::result::Result<Option<String>, String> {
    on_cel_stack(|| {
        let mut ev = Evaluator::new(vars);
        for (j, b) in branches.iter().enumerate() {
            match ev.eval(&b.condition) {
                Ok(cel::Value::Bool(true)) => return Ok(Some(b.next.clone())),
                Ok(cel::Value::Bool(false)) => {}
                Ok(other) => {
                    return Err(format!(
                        "next[{j}].condition `{}` evaluated to a {}, not a bool",
                        b.condition,
                        other.type_of()
                    ));
                }
                Err(e) => return Err(format!("next[{j}].condition `{}` failed: {e}", b.condition)),
            }
        }
        Ok(None)
    })?
}

// ---------------------------------------------------------------------------
// Execution

enum Outcome {
    Done(Value),
    Failed(String),
    Pause,
}

/// Execute from `ex.rec.cursor` until the run ends or pauses. `route_from` is
/// the index of a step that just finished, whose `next` must be followed first.
fn drive(
    e: &Engine,
    ex: &mut Exec,
    actions: &Actions,
    mut route_from: Option<usize>,
) -> Result<()> {
    let index: HashMap<String, usize> = ex
        .rec
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.clone(), i))
        .collect();
    let max_steps = e.opts.limits.max_steps as u64;
    loop {
        if let Some(done) = route_from.take() {
            let step = &ex.rec.steps[done];
            let next = match &step.next {
                None => None,
                Some(Next::Step(t)) => Some(t.clone()),
                Some(Next::Branches(branches)) => {
                    let vars = Vars {
                        params: &ex.rec.params,
                        outputs: &ex.rec.outputs,
                        last: &ex.rec.last,
                    };
                    match choose_branch(branches, &vars) {
                        Ok(n) => n,
                        Err(msg) => {
                            let msg = format!("step {:?}: {msg}", step.id);
                            return finish(e, ex, RunStatus::Failed, Some(msg));
                        }
                    }
                }
            };
            ex.rec.cursor = next;
            ex.save(e)?;
        }
        let Some(step_id) = ex.rec.cursor.clone() else {
            return finish(e, ex, RunStatus::Completed, None);
        };
        let Some(&idx) = index.get(&step_id) else {
            let msg = format!("run points to unknown step {step_id:?}");
            return finish(e, ex, RunStatus::Failed, Some(msg));
        };
        if ex.rec.executed >= max_steps {
            let msg = format!(
                "step limit reached: {max_steps} steps executed (Limits::max_steps = {max_steps}); stopped before step {step_id:?}"
            );
            return finish(e, ex, RunStatus::Failed, Some(msg));
        }
        ex.rec.executed += 1;
        let step = ex.rec.steps[idx].clone();
        let vars = Vars {
            params: &ex.rec.params,
            outputs: &ex.rec.outputs,
            last: &ex.rec.last,
        };
        let params = match resolve_parameters(&step.parameters, &vars).and_then(|p| {
            validate::value(&e.opts.limits, "parameters", &p)
                .map(|()| p)
                .map_err(|e| e.to_string())
        }) {
            Ok(p) => p,
            Err(msg) => {
                let msg = format!("step {:?}: {msg}", step.id);
                push_trace(
                    e,
                    ex,
                    &step,
                    step.parameters.clone(),
                    Value::Null,
                    Some(msg.clone()),
                );
                return finish(e, ex, RunStatus::Failed, Some(msg));
            }
        };
        match run_action(e, &ex.rec.context, &step, &params, actions) {
            Outcome::Done(out) => {
                if let Err(err) = validate::value(&e.opts.limits, "output", &out) {
                    let msg = format!("step {:?} ({}): {err}", step.id, step.action);
                    push_trace(e, ex, &step, params, Value::Null, Some(msg.clone()));
                    return finish(e, ex, RunStatus::Failed, Some(msg));
                }
                ex.rec.outputs.insert(step.id.clone(), out.clone());
                ex.rec.last = out.clone();
                push_trace(e, ex, &step, params, out, None);
                route_from = Some(idx);
            }
            Outcome::Failed(msg) => {
                push_trace(e, ex, &step, params, Value::Null, Some(msg.clone()));
                return finish(e, ex, RunStatus::Failed, Some(msg));
            }
            Outcome::Pause => {
                ex.rec.status = RunStatus::AwaitingAction;
                ex.rec.pending = Some(PendingAction {
                    step: step.id.clone(),
                    description: step.description.clone(),
                    action: step.action.clone(),
                    parameters: params,
                });
                return ex.save(e);
            }
        }
    }
}

fn push_trace(
    e: &Engine,
    ex: &mut Exec,
    step: &Step,
    parameters: Value,
    output: Value,
    error: Option<String>,
) {
    ex.trace.push(TraceRecord {
        step: step.id.clone(),
        action: step.action.clone(),
        parameters,
        output,
        error,
        at: e.opts.clock.now().timestamp_millis(),
    });
}

/// End the run, persist it and record it as an episode tagged `procedure`.
fn finish(e: &Engine, ex: &mut Exec, status: RunStatus, error: Option<String>) -> Result<()> {
    ex.rec.status = status;
    ex.rec.error = error;
    ex.rec.pending = None;
    ex.rec.cursor = None;
    ex.rec.finished_at = Some(e.opts.clock.now().timestamp_millis());
    ex.save(e)?;
    let id = record_episode(e, &ex.rec)?;
    ex.rec.episode_id = Some(id);
    ex.save(e)
}

fn record_episode(e: &Engine, r: &RunRecord) -> Result<String> {
    let n = r.executed;
    let plural = if n == 1 { "" } else { "s" };
    let summary = match (&r.status, &r.error) {
        (RunStatus::Failed, Some(err)) => {
            let short: String = err.chars().take(300).collect();
            let ell = if short.len() < err.len() { "…" } else { "" };
            format!(
                "procedure {:?} failed in {n} step{plural}: {short}{ell}",
                r.procedure
            )
        }
        (status, _) => format!("procedure {:?} {status} in {n} step{plural}", r.procedure),
    };
    let content = json!({
        "run_id": r.run_id,
        "procedure": r.procedure,
        "status": r.status,
        "outputs": r.outputs,
        "error": r.error,
    });
    let ep = NewEpisode::new(summary.clone())
        .content(content)
        .tags([PROCEDURE_TAG]);
    match episodic::record_in(e, &r.context, ep) {
        Err(Error::LimitExceeded { .. } | Error::InvalidInput { .. }) => {
            // Outputs too large for one episode: keep the facts, drop the outputs.
            let content = json!({
                "run_id": r.run_id,
                "procedure": r.procedure,
                "status": r.status,
                "outputs": null,
                "outputs_omitted": true,
                "error": r.error,
            });
            episodic::record_in(
                e,
                &r.context,
                NewEpisode::new(summary)
                    .content(content)
                    .tags([PROCEDURE_TAG]),
            )
        }
        other => other,
    }
}

fn run_action(e: &Engine, ctx: &str, step: &Step, params: &Value, actions: &Actions) -> Outcome {
    let action = step.action.as_str();
    if action == "fail" {
        let msg = match params {
            Value::String(s) => s.clone(),
            Value::Object(o) => match o.get("message") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => format!("step {:?} failed", step.id),
                Some(other) => other.to_string(),
            },
            _ => format!("step {:?} failed", step.id),
        };
        return Outcome::Failed(msg);
    }
    if is_builtin(action) {
        return match run_builtin(e, ctx, action, params) {
            Ok(v) => Outcome::Done(v),
            Err(msg) => Outcome::Failed(format!("step {:?} ({action}) failed: {msg}", step.id)),
        };
    }
    let handler = actions
        .get(action)
        .cloned()
        .or_else(|| e.actions.read().get(action).cloned());
    let Some(handler) = handler else {
        return Outcome::Pause;
    };
    match catch_unwind(AssertUnwindSafe(|| handler.call(params))) {
        Ok(Ok(v)) => Outcome::Done(v),
        Ok(Err(msg)) => Outcome::Failed(format!("step {:?} ({action}) failed: {msg}", step.id)),
        Err(p) => Outcome::Failed(format!(
            "step {:?} ({action}) failed: action handler panicked: {}",
            step.id,
            panic_message(p.as_ref())
        )),
    }
}

// ---------------------------------------------------------------------------
// Built-in actions

type Obj = Map<String, Value>;

fn params_obj(p: &Value) -> std::result::Result<&Obj, String> {
    p.as_object()
        .ok_or_else(|| format!("parameters must be a JSON object, got {}", json_type(p)))
}

fn req_str<'a>(o: &'a Obj, name: &str) -> std::result::Result<&'a str, String> {
    match o.get(name) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(format!("parameters.{name} is required")),
        Some(other) => Err(format!(
            "parameters.{name} must be a string, got {}",
            json_type(other)
        )),
    }
}

fn opt_str<'a>(o: &'a Obj, name: &str) -> std::result::Result<Option<&'a str>, String> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!(
            "parameters.{name} must be a string, got {}",
            json_type(other)
        )),
    }
}

fn req_value(o: &Obj, name: &str) -> std::result::Result<Value, String> {
    o.get(name)
        .cloned()
        .ok_or_else(|| format!("parameters.{name} is required"))
}

fn opt_str_list(o: &Obj, name: &str) -> std::result::Result<Vec<String>, String> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!(
                    "parameters.{name}[{i}] must be a string, got {}",
                    json_type(other)
                )),
            })
            .collect(),
        Some(other) => Err(format!(
            "parameters.{name} must be a list of strings, got {}",
            json_type(other)
        )),
    }
}

fn opt_u64(o: &Obj, name: &str) -> std::result::Result<Option<u64>, String> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("parameters.{name} must be a non-negative integer, got {v}")),
    }
}

fn opt_u8(o: &Obj, name: &str) -> std::result::Result<Option<u8>, String> {
    match opt_u64(o, name)? {
        None => Ok(None),
        Some(n) => u8::try_from(n)
            .map(Some)
            .map_err(|_| format!("parameters.{name} must be in 1..=10, got {n}")),
    }
}

fn to_json<T: Serialize>(v: T) -> std::result::Result<Value, String> {
    serde_json::to_value(v).map_err(|e| format!("cannot convert the result to JSON: {e}"))
}

fn run_builtin(
    e: &Engine,
    ctx: &str,
    action: &str,
    p: &Value,
) -> std::result::Result<Value, String> {
    let err = |x: Error| x.to_string();
    match action {
        "set" => Ok(p.clone()),
        "short_term.store" => {
            let o = params_obj(p)?;
            let key = req_str(o, "key")?;
            let value = req_value(o, "value")?;
            let ttl = match o.get("ttl") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_f64().ok_or_else(|| {
                    format!("parameters.ttl must be a number of seconds, got {v}")
                })?),
            };
            let ttl = validate::ttl("parameters.ttl", ttl).map_err(err)?;
            let entry = e
                .timed("short_term.store", || {
                    short_term::store_in(e, ctx, key, value, ttl)
                })
                .map_err(err)?;
            to_json(entry)
        }
        "short_term.retrieve" => {
            let o = params_obj(p)?;
            let key = req_str(o, "key")?;
            let entry = e
                .timed("short_term.retrieve", || short_term::entry_in(e, ctx, key))
                .map_err(err)?;
            Ok(entry.map_or(Value::Null, |x| x.value))
        }
        "episodic.record" => {
            let o = params_obj(p)?;
            let ep = NewEpisode {
                summary: req_str(o, "summary")?.to_owned(),
                content: o.get("content").cloned().unwrap_or(Value::Null),
                participants: opt_str_list(o, "participants")?,
                tags: opt_str_list(o, "tags")?,
                importance: opt_u8(o, "importance")?,
                timestamp: None,
            };
            let id = e
                .timed("episodic.record", || episodic::record_in(e, ctx, ep))
                .map_err(err)?;
            Ok(json!({ "id": id }))
        }
        "episodic.search" => {
            let o = params_obj(p)?;
            let query = opt_str(o, "query")?.unwrap_or("");
            let limit = match opt_u64(o, "limit")? {
                None => DEFAULT_SEARCH_LIMIT,
                Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            };
            let filters = SearchFilters {
                tags: opt_str_list(o, "tags")?,
                participants: opt_str_list(o, "participants")?,
                min_importance: opt_u8(o, "min_importance")?,
                ..SearchFilters::default()
            };
            let hits = e
                .timed("episodic.search", || {
                    episodic::search_in(e, ctx, query, &filters, limit)
                })
                .map_err(err)?;
            Ok(json!({ "hits": to_json(hits)? }))
        }
        "semantic.store" => {
            let o = params_obj(p)?;
            let key = req_str(o, "key")?;
            let knowledge = req_value(o, "knowledge")?;
            let k = e
                .timed("semantic.store", || {
                    semantic::store_in(e, ctx, key, knowledge)
                })
                .map_err(err)?;
            to_json(k)
        }
        "semantic.retrieve" => {
            let o = params_obj(p)?;
            let key = req_str(o, "key")?;
            let k = e
                .timed("semantic.retrieve", || semantic::get_in(e, ctx, key))
                .map_err(err)?;
            Ok(k.map_or(Value::Null, |k| k.knowledge))
        }
        "working.focus" => {
            let o = params_obj(p)?;
            let item = req_str(o, "item")?;
            let added = e
                .timed("working.focus", || working::focus_in(e, ctx, item))
                .map_err(err)?;
            Ok(json!({ "added": added }))
        }
        "workspace.add" => {
            let o = params_obj(p)?;
            let value = req_value(o, "value")?;
            let id = e
                .timed("working.add_to_workspace", || {
                    working::add_in(e, ctx, value)
                })
                .map_err(err)?;
            Ok(json!({ "id": id }))
        }
        other => Err(format!("unknown built-in action {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_segments() {
        assert_eq!(parse_template("plain").unwrap(), vec![Seg::Text("plain")]);
        assert_eq!(parse_template("{{ a.b }}").unwrap(), vec![Seg::Expr("a.b")]);
        assert_eq!(
            parse_template("x={{ 1 + 2 }}!").unwrap(),
            vec![Seg::Text("x="), Seg::Expr("1 + 2"), Seg::Text("!")]
        );
        assert_eq!(
            parse_template(r#"{{ "{{" }}"#).unwrap(),
            vec![Seg::Expr(r#""{{""#)]
        );
        assert!(parse_template("{{ open").is_err());
        assert!(parse_template("{{   }}").is_err());
    }

    #[test]
    fn deep_expressions_do_not_overflow_the_callers_stack() {
        // ~90 nested parentheses overflow a 2 MiB stack in an unoptimised build
        // if parsed in place; on the CEL thread they are fine.
        let params = json!({});
        let outputs = Map::new();
        let vars = Vars {
            params: &params,
            outputs: &outputs,
            last: &Value::Null,
        };
        let src = format!("{{{{ {}1{} }}}}", "(".repeat(90), ")".repeat(90));
        let v = resolve_parameters(&json!({ "x": src }), &vars).unwrap();
        assert_eq!(v, json!({ "x": 1 }));
        let too_deep = format!("{}true{}", "(".repeat(200), ")".repeat(200));
        let r = choose_branch(&[Branch::new(too_deep, "a")], &vars);
        assert!(r.is_err());
    }
}

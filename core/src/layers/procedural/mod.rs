//! Procedural memory: named step graphs ("procedures") that the engine executes.
//!
//! A procedure is a list of [`Step`]s. Execution starts at the first step,
//! resolves the step's parameter templates (`{{ expr }}`, CEL), runs its action
//! (a built-in memory action, a host action, or — when nothing handles the
//! action — a pause waiting for [`Procedural::resume`]), stores the output and
//! follows `next`. Runs are persisted after every step, so a paused run
//! survives a restart. See `docs/procedures.md` for the user-facing contract.

mod builtins;
mod executor;
mod expr;
mod model;
mod parse;

use std::sync::Arc;

use serde_json::{Map, Value};

pub use self::builtins::BUILTIN_ACTIONS;
pub use self::executor::PROCEDURE_TAG;
pub use self::expr::MAX_EXPRESSION_BYTES;
pub use self::model::{
    Actions, Branch, Next, PendingAction, Procedure, Run, RunStatus, Step, TraceEntry,
};
pub use self::parse::steps_from_json;

use self::builtins::is_builtin;
use self::executor::{Exec, drive};
use self::model::{
    ProcedureRecord, RunRecord, TraceRecord, empty_object, load_procedure, load_run_header,
    load_trace, to_procedure,
};
use self::parse::{check_actions, json_type, validate_steps};
pub use crate::engine::ActionHandler;
// `validate` here is this module's parsing and graph checks; the engine-wide
// argument checks (keys, values, limits) are `check`.
use crate::engine::Scope;
use crate::{Error, Result, storage::codec, util::input as check};

/// Handle on the procedural layer of the active context. Get it from [`Memory::procedural`](crate::Memory::procedural).
#[derive(Debug, Clone)]
pub struct Procedural {
    pub(crate) scope: Scope,
}

// ---------------------------------------------------------------------------
// The public API

impl Procedural {
    /// Store a new procedure. Validates the graph (see `docs/procedures.md`);
    /// `Conflict` when `name` already exists in this context (use [`Procedural::update`]).
    pub fn learn(&self, name: &str, steps: Vec<Step>) -> Result<Procedure> {
        let e = &self.scope.engine;
        e.timed("procedural.learn", || {
            check::key(&e.opts.limits, "name", name)?;
            validate_steps(e, &steps)?;
            let ctx = self.scope.active_ctx();
            let key = codec::ctx_key(&ctx, name);
            let now = e.opts.clock.now().timestamp_millis();
            let rec = ProcedureRecord {
                steps,
                version: 1,
                created_at: now,
                updated_at: now,
            };
            let enc = e.codec.encode(&rec)?;
            e.touch_context(&ctx)?;
            {
                let _g = e.rmw_lock()?;
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
        let e = &self.scope.engine;
        e.timed("procedural.update", || {
            check::key(&e.opts.limits, "name", name)?;
            validate_steps(e, &steps)?;
            let ctx = self.scope.active_ctx();
            let key = codec::ctx_key(&ctx, name);
            let rec = {
                let _g = e.rmw_lock()?;
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
                e.t.procedures.insert(key, e.codec.encode(&rec)?)?;
                rec
            };
            e.after_write()?;
            Ok(to_procedure(name, rec))
        })
    }

    /// The procedure `name`, or `None`.
    pub fn get(&self, name: &str) -> Result<Option<Procedure>> {
        let e = &self.scope.engine;
        e.timed("procedural.get", || {
            check::key(&e.opts.limits, "name", name)?;
            Ok(load_procedure(e, &self.scope.active_ctx(), name)?.map(|r| to_procedure(name, r)))
        })
    }

    /// Names of the procedures of this context, sorted.
    pub fn list(&self) -> Result<Vec<String>> {
        let e = &self.scope.engine;
        e.timed("procedural.list", || {
            let mut out = Vec::new();
            for k in
                e.t.procedures
                    .scan_prefix(codec::ctx_prefix(&self.scope.active_ctx()))
                    .keys()
            {
                out.push(codec::split_ctx_key(&k?)?.1);
            }
            Ok(out)
        })
    }

    /// Delete a procedure; `true` when it existed. Its runs are kept.
    pub fn forget(&self, name: &str) -> Result<bool> {
        let e = &self.scope.engine;
        e.timed("procedural.forget", || {
            check::key(&e.opts.limits, "name", name)?;
            let old = {
                let _g = e.rmw_lock()?;
                e.t.procedures
                    .remove(codec::ctx_key(&self.scope.active_ctx(), name))?
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
        let e = &self.scope.engine;
        e.timed("procedural.execute", || {
            check::key(&e.opts.limits, "name", name)?;
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
            check::value(&e.opts.limits, "params", &params)?;
            let ctx = self.scope.active_ctx();
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
        let e = &self.scope.engine;
        e.timed("procedural.resume", || {
            check::key(&e.opts.limits, "run_id", run_id)?;
            check::value(&e.opts.limits, "output", &output)?;
            check_actions(e, actions)?;
            let (mut ex, idx) = {
                let _g = e.rmw_lock()?;
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
        let e = &self.scope.engine;
        e.timed("procedural.run", || {
            check::key(&e.opts.limits, "run_id", run_id)?;
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
        let e = &self.scope.engine;
        e.check_process()?;
        check::key(&e.opts.limits, "name", name)?;
        if is_builtin(name) {
            return Err(Error::invalid(
                "name",
                format!("{name:?} is a built-in action and cannot be replaced"),
            ));
        }
        e.register_action(name, handler);
        Ok(())
    }

    /// Remove an engine-wide host action; `true` when it was registered.
    pub fn unregister_action(&self, name: &str) -> bool {
        self.scope.engine.unregister_action(name)
    }

    /// Names of the engine-wide host actions, sorted.
    pub fn registered_actions(&self) -> Vec<String> {
        let mut v: Vec<String> = self.scope.engine.action_names();
        v.sort();
        v
    }
}

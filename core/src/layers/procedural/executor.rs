//! Running a procedure: step after step until the run ends or pauses, with
//! the run persisted after every step and an episode recorded at the end.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::{Value, json};

use super::builtins::{fail_message, is_builtin, run_builtin};
use super::expr::{Vars, choose_branch, panic_message, resolve_parameters};
use super::model::{
    Actions, Next, PendingAction, Run, RunRecord, RunStatus, Step, TraceEntry, TraceRecord,
    trace_key,
};
use crate::config::clock::millis_to_dt;
use crate::engine::Engine;
use crate::layers::dedup::OnDuplicate;
use crate::layers::episodic::{self, NewEpisode};
use crate::{Error, Result, util::input};

/// Tag of the episode recorded for every finished run.
pub const PROCEDURE_TAG: &str = "procedure";

/// A run being executed: the header, the full trace and how much of it is on disk.
pub(super) struct Exec {
    pub(super) rec: RunRecord,
    pub(super) trace: Vec<TraceRecord>,
    pub(super) saved: usize,
}

impl Exec {
    /// Write the header and the unsaved trace entries atomically.
    pub(super) fn save(&mut self, e: &Engine) -> Result<()> {
        let mut batch = crate::storage::Batch::default();
        for (i, t) in self.trace.iter().enumerate().skip(self.saved) {
            batch.insert(trace_key(&self.rec.run_id, i as u64), e.codec.encode(t)?);
        }
        batch.insert(self.rec.run_id.as_bytes(), e.codec.encode(&self.rec)?);
        e.t.runs.apply_batch(batch)?;
        e.after_write()?;
        self.saved = self.trace.len();
        Ok(())
    }

    pub(super) fn to_public(&self) -> Run {
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

enum Outcome {
    Done(Value),
    Failed(String),
    Pause,
}

/// Execute from `ex.rec.cursor` until the run ends or pauses. `route_from` is
/// the index of a step that just finished, whose `next` must be followed first.
pub(super) fn drive(
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
            input::value(&e.opts.limits, "parameters", &p)
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
                if let Err(err) = input::value(&e.opts.limits, "output", &out) {
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
        .tags([PROCEDURE_TAG])
        // A run's own record: never skipped or merged into another run's.
        .on_duplicate(OnDuplicate::Keep);
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
                    .tags([PROCEDURE_TAG])
                    .on_duplicate(OnDuplicate::Keep),
            )
        }
        other => other,
    }
}

fn run_action(e: &Engine, ctx: &str, step: &Step, params: &Value, actions: &Actions) -> Outcome {
    let action = step.action.as_str();
    if action == "fail" {
        return Outcome::Failed(fail_message(step, params));
    }
    if is_builtin(action) {
        return match run_builtin(e, ctx, action, params) {
            Ok(v) => Outcome::Done(v),
            Err(msg) => Outcome::Failed(format!("step {:?} ({action}) failed: {msg}", step.id)),
        };
    }
    let handler = actions.get(action).cloned().or_else(|| e.action(action));
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

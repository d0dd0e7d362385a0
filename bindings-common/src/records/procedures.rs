//! Result records of procedures: definitions, pending actions, runs and their traces, declared with the [`records!`]
//! macro of the parent, with their conversions from the core's types.

#[allow(unused_imports)]
use super::*;

records! {
    /// A learned procedure.
    pub struct Procedure {
        /// Name.
        pub name: String,
        /// Its steps, each as the JSON object it was learned from
        /// (`{id, description, action, parameters, next?}`).
        pub steps: Vec<JsonValue>,
        /// 1 on learn, +1 on every update.
        pub version: i64,
        /// First learned.
        pub created_at: Timestamp,
        /// Last updated.
        pub updated_at: Timestamp,
    }

    /// The host action a paused run waits for.
    pub struct PendingAction {
        /// Step id.
        pub step: String,
        /// The step's description.
        pub description: String,
        /// The action with no handler.
        pub action: String,
        /// Its resolved parameters.
        pub parameters: JsonValue,
    }

    /// One executed step.
    pub struct TraceEntry {
        /// Step id.
        pub step: String,
        /// Action run.
        pub action: String,
        /// Resolved parameters.
        pub parameters: JsonValue,
        /// Output (null on error).
        pub output: JsonValue,
        /// Why the step failed (null: it did not).
        pub error: Option<String>,
        /// When it ran.
        pub at: Timestamp,
    }

    /// A procedure run.
    pub struct Run {
        /// Run id (for `resume` and `run`).
        pub run_id: String,
        /// Procedure name.
        pub procedure: String,
        /// Procedure version the run uses.
        pub procedure_version: i64,
        /// Context it runs in.
        pub context: String,
        /// `"running"`, `"awaiting_action"`, `"completed"` or `"failed"`.
        pub status: String,
        /// The parameters it was started with.
        pub params: JsonValue,
        /// Output of every step so far, by step id (an object).
        pub outputs: JsonValue,
        /// Steps executed, in order.
        pub trace: Vec<TraceEntry>,
        /// The action it waits for (`awaiting_action` only).
        pub pending: Option<PendingAction>,
        /// Why it failed (`failed` only).
        pub error: Option<String>,
        /// Steps executed.
        pub steps_executed: i64,
        /// Episode recorded when it finished.
        pub episode_id: Option<String>,
        /// Started.
        pub started_at: Timestamp,
        /// Finished (null while running or paused).
        pub finished_at: Option<Timestamp>,
    }
}

impl From<memstrata::procedural::Procedure> for Procedure {
    fn from(p: memstrata::procedural::Procedure) -> Self {
        Procedure {
            name: p.name,
            steps: p
                .steps
                .iter()
                .map(|s| JsonValue(serde_json::to_value(s).unwrap_or_default()))
                .collect(),
            version: int(p.version),
            created_at: ts(p.created_at),
            updated_at: ts(p.updated_at),
        }
    }
}

impl From<memstrata::procedural::PendingAction> for PendingAction {
    fn from(p: memstrata::procedural::PendingAction) -> Self {
        PendingAction {
            step: p.step,
            description: p.description,
            action: p.action,
            parameters: JsonValue(p.parameters),
        }
    }
}

impl From<memstrata::procedural::TraceEntry> for TraceEntry {
    fn from(t: memstrata::procedural::TraceEntry) -> Self {
        TraceEntry {
            step: t.step,
            action: t.action,
            parameters: JsonValue(t.parameters),
            output: JsonValue(t.output),
            error: t.error,
            at: ts(t.at),
        }
    }
}

impl From<memstrata::procedural::Run> for Run {
    fn from(r: memstrata::procedural::Run) -> Self {
        Run {
            run_id: r.run_id,
            procedure: r.procedure,
            procedure_version: int(r.procedure_version),
            context: r.context,
            status: r.status.as_str().to_owned(),
            params: JsonValue(r.params),
            outputs: JsonValue(serde_json::Value::Object(r.outputs)),
            trace: r.trace.into_iter().map(Into::into).collect(),
            pending: r.pending.map(Into::into),
            error: r.error,
            steps_executed: int(r.steps_executed),
            episode_id: r.episode_id,
            started_at: ts(r.started_at),
            finished_at: opt_ts(r.finished_at),
        }
    }
}

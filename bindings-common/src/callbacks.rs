//! Adapters from a binding's callbacks to what the core takes.
//!
//! - Host actions: every foreign language hands over one callable per action
//!   name, or one object with `call(action, parameters)`. [`JsonAction`] is
//!   the second shape; [`actions`] turns it into the core's
//!   [`memstrata::procedural::Actions`] for the names the host handles (an action not in
//!   the list pauses the run, as the core specifies).
//! - Progress: [`ProgressStage`] and [`ProgressEvent`] are the owned,
//!   documented form of the core's [`memstrata::admin::Progress`].

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::types::int;

/// A host that runs actions by name: JSON parameters in, JSON output out.
/// An `Err` fails the step with that message.
pub trait JsonAction: Send + Sync {
    /// Run `action` with the step's resolved `parameters`.
    fn call(&self, action: &str, parameters: &Value) -> Result<Value, String>;
}

/// The core's action table for `names`, each dispatching to `host`.
pub fn actions<I, S>(names: I, host: Arc<dyn JsonAction>) -> memstrata::procedural::Actions
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    names
        .into_iter()
        .map(|name| {
            let name: String = name.into();
            let host = Arc::clone(&host);
            let action = name.clone();
            let handler: Arc<dyn memstrata::procedural::ActionHandler> =
                Arc::new(move |p: &Value| host.call(&action, p));
            (name, handler)
        })
        .collect()
}

/// What a long operation is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "snake_case"))]
pub enum ProgressStage {
    /// `optimize`: purging expired short-term items.
    Sweep,
    /// `optimize` (medium and up): pruning and recompressing session versions, one session at a time.
    PruneSessions,
    /// `optimize` (aggressive): merging index segments.
    MergeIndex,
    /// `optimize`: flushing to disk.
    Flush,
    /// `import`: reading and checking every line (`done` counts lines; nothing is written yet).
    Validate,
    /// `import`: writing records (`done` out of `total`).
    Apply,
    /// A stage this version of the bindings does not know (a newer engine).
    Other,
}

impl ProgressStage {
    /// The stage's wire name (`"sweep"`, `"prune_sessions"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ProgressStage::Sweep => "sweep",
            ProgressStage::PruneSessions => "prune_sessions",
            ProgressStage::MergeIndex => "merge_index",
            ProgressStage::Flush => "flush",
            ProgressStage::Validate => "validate",
            ProgressStage::Apply => "apply",
            ProgressStage::Other => "other",
        }
    }

    /// The stage named `s` ([`ProgressStage::Other`] when unknown).
    pub fn parse(s: &str) -> ProgressStage {
        match s {
            "sweep" => ProgressStage::Sweep,
            "prune_sessions" => ProgressStage::PruneSessions,
            "merge_index" => ProgressStage::MergeIndex,
            "flush" => ProgressStage::Flush,
            "validate" => ProgressStage::Validate,
            "apply" => ProgressStage::Apply,
            _ => ProgressStage::Other,
        }
    }
}

/// One progress report of `optimize` or `import`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
pub struct ProgressEvent {
    /// What is running.
    pub stage: ProgressStage,
    /// Items done so far in this stage (never decreases within a stage).
    pub done: i64,
    /// Items in this stage, when known.
    pub total: Option<i64>,
    /// Human-readable detail.
    pub message: String,
}

impl From<memstrata::admin::Progress> for ProgressEvent {
    fn from(p: memstrata::admin::Progress) -> Self {
        ProgressEvent {
            stage: ProgressStage::parse(p.stage),
            done: int(p.done),
            total: p.total.map(int),
            message: p.message,
        }
    }
}

/// A core progress callback that forwards each report, converted, to `sink`.
pub fn progress_sink<F>(sink: F) -> impl Fn(memstrata::admin::Progress)
where
    F: Fn(ProgressEvent),
{
    move |p| sink(p.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use serde_json::json;

    struct Host;
    impl JsonAction for Host {
        fn call(&self, action: &str, parameters: &Value) -> Result<Value, String> {
            match action {
                "double" => Ok(json!(parameters["n"].as_i64().unwrap_or(0) * 2)),
                _ => Err(format!("{action} refused")),
            }
        }
    }

    #[test]
    fn a_json_host_runs_its_actions_and_the_rest_pause() {
        let mem = memstrata::Memory::temporary().unwrap();
        let steps: Vec<memstrata::procedural::Step> = serde_json::from_value(json!([
            {"id": "a", "action": "double", "parameters": {"n": 21}, "next": "b"},
            {"id": "b", "action": "ask_human"}
        ]))
        .unwrap();
        mem.procedural().learn("p", steps).unwrap();
        let table = actions(["double"], Arc::new(Host));
        let run = mem.procedural().execute("p", json!({}), &table).unwrap();
        assert_eq!(run.status, memstrata::procedural::RunStatus::AwaitingAction);
        assert_eq!(run.outputs["a"], json!(42));
        assert_eq!(run.pending.unwrap().action, "ask_human");
    }

    #[test]
    fn progress_reports_arrive_as_owned_events() {
        let mem = memstrata::Memory::temporary().unwrap();
        let seen = Mutex::new(Vec::new());
        let sink = progress_sink(|e: ProgressEvent| seen.lock().push(e.stage));
        mem.admin()
            .optimize_with_progress(memstrata::admin::OptimizeLevel::Light, None, &sink)
            .unwrap();
        drop(sink);
        let seen = seen.into_inner();
        assert!(seen.contains(&ProgressStage::Sweep), "{seen:?}");
        assert!(!seen.contains(&ProgressStage::Other), "{seen:?}");
    }
}

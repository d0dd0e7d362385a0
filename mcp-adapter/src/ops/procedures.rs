//! Procedure tools. Over MCP there are no host actions: a step whose action
//! is not built in pauses the run (`status: "awaiting_action"`, `pending`
//! says what to do); the model performs it and calls `procedure_resume` with
//! the output. Runs are persisted, so this works across restarts.

use memstrata_bindings_common as common;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Cx, Done, Op, ctx_target};
use crate::error::{ToolError, ToolResult};
use crate::security::auth::{Access, Target};
use memstrata_bindings_common::ErrorCode::{Conflict, NotFound};
use memstrata_bindings_common::defaults::{page, page_limit, parse_cursor};

/// Trace entries a run result carries (the most recent ones).
pub const MAX_TRACE: usize = 100;

/// Result of `procedure_execute` and `procedure_resume`: the run, with only
/// the last [`MAX_TRACE`] trace entries.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BoundedRun {
    /// The run (its `trace` holds the most recent 100 entries when longer; see `trace_omitted`).
    #[serde(flatten)]
    pub run: common::Run,
    /// Older trace entries left out of this result (absent when none were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_omitted: Option<i64>,
}

impl BoundedRun {
    /// `run` with its trace cut to the last [`MAX_TRACE`] entries.
    pub fn new(run: memstrata::procedural::Run) -> BoundedRun {
        let mut run = common::Run::from(run);
        let omitted = run.trace.len().saturating_sub(MAX_TRACE);
        run.trace.drain(..omitted);
        BoundedRun {
            run,
            trace_omitted: (omitted > 0).then(|| i64::try_from(omitted).unwrap_or(i64::MAX)),
        }
    }
}

/// The input schema of a procedure step (what `procedure_learn` and
/// `procedure_update` take; the core parses and validates the JSON itself).
/// Results carry steps as the JSON objects they were learned from.
#[allow(dead_code, reason = "schema only: steps are parsed by the core")]
mod step_schema {
    use schemars::JsonSchema;
    use serde_json::Value;

    /// A conditional branch of a step.
    #[derive(JsonSchema)]
    pub struct Branch {
        /// CEL expression over `params`, `steps.<id>.output` and `last`; must be a bool.
        pub condition: String,
        /// Step id to go to when the condition is true.
        pub next: String,
    }

    /// Where a step goes next.
    #[derive(JsonSchema)]
    #[serde(untagged)]
    pub enum Next {
        /// Always go to this step id.
        Step(String),
        /// The first branch whose condition is true (none: the run ends).
        Branches(Vec<Branch>),
    }

    /// One step of a procedure.
    #[derive(JsonSchema)]
    pub struct Step {
        /// Unique id within the procedure.
        pub id: String,
        /// Free text, shown when the step pauses for an action.
        #[serde(default)]
        pub description: String,
        /// A built-in action (set, fail, short_term.store, short_term.retrieve, episodic.record, episodic.search, semantic.store, semantic.retrieve, working.focus, workspace.add) or any other name: the run pauses there and you perform it.
        pub action: String,
        /// Parameters (any JSON, default {}); strings may hold `{{ expr }}` CEL templates over params, steps and last.
        #[serde(default)]
        pub parameters: Value,
        /// Next step id, or a list of {condition, next} branches; absent: the run ends after this step.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub next: Option<Next>,
    }
}

macro_rules! steps_args {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Procedure name (unique per context).
            pub name: String,
            /// The steps; execution starts at the first. Ids must be unique, every `next` must exist and every condition must compile.
            #[schemars(with = "Vec<step_schema::Step>")]
            pub steps: Value,
            /// Context (default: the active context).
            #[serde(default)]
            pub namespace: Option<String>,
        }
    };
}

steps_args!(
    /// Arguments of `procedure_learn`.
    ProcedureLearn
);
steps_args!(
    /// Arguments of `procedure_update`.
    ProcedureUpdate
);

impl Op for ProcedureLearn {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        let steps = memstrata::procedural::steps_from_json(self.steps)?;
        let p = mem.procedural().learn(&self.name, steps).map_err(|e| {
            ToolError::from(e).hint_on(Conflict, "Use procedure_update to change it")
        })?;
        Done::of(&common::Procedure::from(p))
    }
}

impl Op for ProcedureUpdate {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        let steps = memstrata::procedural::steps_from_json(self.steps)?;
        let p = mem.procedural().update(&self.name, steps).map_err(|e| {
            ToolError::from(e).hint_on(NotFound, "Use procedure_learn to create it")
        })?;
        Done::of(&common::Procedure::from(p))
    }
}

/// Arguments of `procedure_list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcedureList {
    /// Names per page, 1..=100 (default 10; larger values are capped).
    #[serde(default)]
    pub limit: Option<u32>,
    /// `next_cursor` from the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `procedure_list`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProcedureNames {
    /// Procedure names, sorted.
    pub procedures: Vec<String>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

impl Op for ProcedureList {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        let offset = parse_cursor(self.cursor.as_deref())?;
        let (procedures, next_cursor) =
            page(mem.procedural().list()?, offset, page_limit(self.limit));
        Done::of(&ProcedureNames {
            procedures,
            next_cursor,
        })
    }
}

/// Arguments of `procedure_execute`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcedureExecute {
    /// Procedure name.
    pub name: String,
    /// Parameters, available to templates and conditions as `params` (default {}).
    #[serde(default)]
    pub params: Option<Value>,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

impl Op for ProcedureExecute {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        let run = mem.procedural().execute(
            &self.name,
            self.params
                .unwrap_or_else(|| Value::Object(Default::default())),
            &memstrata::procedural::Actions::new(),
        )?;
        Done::of(&BoundedRun::new(run))
    }
}

/// Arguments of `procedure_resume`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcedureResume {
    /// Run id of a run whose status is awaiting_action.
    pub run_id: String,
    /// The output of the pending step's action (any JSON); it becomes that step's output.
    pub output: Value,
}

impl Op for ProcedureResume {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        let ctx = match cx.mem.procedural().run(&self.run_id)? {
            Some(run) => run.context,
            None => cx.active(),
        };
        Ok(vec![Target::Context(ctx, Access::Write)])
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let run = cx
            .mem
            .procedural()
            .resume(
                &self.run_id,
                self.output,
                &memstrata::procedural::Actions::new(),
            )
            .map_err(|e| {
                ToolError::from(e)
                    .hint_on(NotFound, "Use the run_id returned by procedure_execute")
                    .hint_on(
                        Conflict,
                        "Only a run with status awaiting_action can be resumed",
                    )
            })?;
        Done::of(&BoundedRun::new(run))
    }
}

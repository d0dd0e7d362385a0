//! `mem.procedural`: procedures (step graphs) and their runs, with host actions in JS.

use std::sync::Arc;

use memstrata_bindings_common::{BindingError, Handle, JsonValue, Procedure, Run};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use crate::callbacks::{ActionReturn, JsActions};
use crate::error;
use crate::task::with;

/// Procedures of the active context (`mem.procedural`).
#[napi]
#[derive(Debug)]
pub struct Procedural {
    pub(crate) h: Arc<Handle>,
}

fn steps(
    steps: Vec<JsonValue>,
) -> std::result::Result<Vec<memstrata::procedural::Step>, BindingError> {
    let value = Value::Array(steps.into_iter().map(JsonValue::into_inner).collect());
    Ok(memstrata::procedural::steps_from_json(value)?)
}

/// `options.actions` of `execute` / `resume`, converted on the JS thread.
fn actions(env: &Env, options: Option<Object<'_>>) -> Result<memstrata::procedural::Actions> {
    let Some(obj) = options else {
        return Ok(memstrata::procedural::Actions::default());
    };
    let field = |e: Error| error::to_napi(env, BindingError::invalid("actions", e.reason.clone()));
    match obj.get::<Object<'_>>("actions").map_err(field)? {
        None => Ok(memstrata::procedural::Actions::default()),
        Some(a) => JsActions::from_object(&a, "actions")
            .map(JsActions::table)
            .map_err(|e| error::to_napi(env, e)),
    }
}

#[napi]
impl Procedural {
    /// Store a new procedure: an array of steps `{ id, description, action, parameters, next }`
    /// (docs/procedures.md). The graph is validated; `CONFLICT` if `name` exists.
    #[napi]
    pub fn learn<'env>(
        &self,
        env: &'env Env,
        name: String,
        steps: Vec<JsonValue>,
    ) -> Result<PromiseRaw<'env, Procedure>> {
        with(env, &self.h, move |m| {
            let s = self::steps(steps)?;
            Ok(m.procedural().learn(&name, s)?.into())
        })
    }

    /// Replace the steps of an existing procedure (`NOT_FOUND` otherwise); bumps its version.
    #[napi]
    pub fn update<'env>(
        &self,
        env: &'env Env,
        name: String,
        steps: Vec<JsonValue>,
    ) -> Result<PromiseRaw<'env, Procedure>> {
        with(env, &self.h, move |m| {
            let s = self::steps(steps)?;
            Ok(m.procedural().update(&name, s)?.into())
        })
    }

    /// The procedure `name`, or null.
    #[napi]
    pub fn get<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> Result<PromiseRaw<'env, Option<Procedure>>> {
        with(env, &self.h, move |m| {
            Ok(m.procedural().get(&name)?.map(Into::into))
        })
    }

    /// Names of the procedures of this context, sorted.
    #[napi]
    pub fn list<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Vec<String>>> {
        with(env, &self.h, |m| Ok(m.procedural().list()?))
    }

    /// Delete a procedure; true when it existed. Its runs are kept.
    #[napi]
    pub fn forget<'env>(&self, env: &'env Env, name: String) -> Result<PromiseRaw<'env, bool>> {
        with(env, &self.h, move |m| Ok(m.procedural().forget(&name)?))
    }

    /// Run procedure `name` with `params`. `actions` maps host action names to functions
    /// (sync or async) receiving the step's resolved parameters and returning a JSON
    /// value; a throw or rejection fails the step. A step whose action has no function
    /// pauses the run (`status: "awaiting_action"`); continue it with `resume`.
    #[napi(
        ts_args_type = "name: string, params?: JsonValue, options?: { actions?: Record<string, HostAction> }"
    )]
    pub fn execute<'env>(
        &self,
        env: &'env Env,
        name: String,
        params: Option<JsonValue>,
        options: Option<Object<'env>>,
    ) -> Result<PromiseRaw<'env, Run>> {
        let actions = actions(env, options)?;
        let params = params.map_or(Value::Null, JsonValue::into_inner);
        with(env, &self.h, move |m| {
            Ok(m.procedural().execute(&name, params, &actions)?.into())
        })
    }

    /// Continue a run paused on a step: `output` becomes that step's output.
    /// `NOT_FOUND` for an unknown run, `CONFLICT` when it is not awaiting an action.
    #[napi(
        ts_args_type = "runId: string, output?: JsonValue, options?: { actions?: Record<string, HostAction> }"
    )]
    pub fn resume<'env>(
        &self,
        env: &'env Env,
        run_id: String,
        output: Option<JsonValue>,
        options: Option<Object<'env>>,
    ) -> Result<PromiseRaw<'env, Run>> {
        let actions = actions(env, options)?;
        let output = output.map_or(Value::Null, JsonValue::into_inner);
        with(env, &self.h, move |m| {
            Ok(m.procedural().resume(&run_id, output, &actions)?.into())
        })
    }

    /// The run `runId` (any context), or null.
    #[napi]
    pub fn run<'env>(
        &self,
        env: &'env Env,
        run_id: String,
    ) -> Result<PromiseRaw<'env, Option<Run>>> {
        with(env, &self.h, move |m| {
            Ok(m.procedural().run(&run_id)?.map(Into::into))
        })
    }

    /// Register a host action for every handle on this store (replacing one of the same
    /// name); per-call `actions` take precedence. Built-in names are refused.
    #[napi(ts_args_type = "name: string, action: HostAction")]
    pub fn register_action<'env>(
        &self,
        env: &'env Env,
        name: String,
        action: Function<'env, JsonValue, ActionReturn>,
    ) -> Result<PromiseRaw<'env, ()>> {
        let table = JsActions::single(&action, &name)
            .map_err(|e| error::to_napi(env, e))?
            .table();
        with(env, &self.h, move |m| {
            let handler = table
                .get(&name)
                .cloned()
                .ok_or_else(|| BindingError::internal("the action table lost its only entry"))?;
            Ok(m.procedural().register_action(&name, handler)?)
        })
    }

    /// Remove an engine-wide host action; true when it was registered.
    #[napi]
    pub fn unregister_action<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> Result<PromiseRaw<'env, bool>> {
        with(env, &self.h, move |m| {
            Ok(m.procedural().unregister_action(&name))
        })
    }

    /// Names of the engine-wide host actions, sorted.
    #[napi]
    pub fn registered_actions<'env>(
        &self,
        env: &'env Env,
    ) -> Result<PromiseRaw<'env, Vec<String>>> {
        with(env, &self.h, |m| Ok(m.procedural().registered_actions()))
    }
}

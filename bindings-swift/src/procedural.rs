//! Procedures, host actions as a foreign-implemented trait, progress as a
//! foreign callback.

use std::sync::Arc;

use memstrata_bindings_common::{
    self as common, BindingError, Handle, JsonAction, ProgressEvent, Run, actions,
};
use serde_json::Value;

use crate::memory::{json, opt_json};
use crate::{ActionError, MemstrataError, pool};

/// Host actions for procedures, implemented in Swift or Kotlin.
///
/// `actions()` names the actions this host runs; a step whose action is
/// neither built in nor named there pauses the run (`awaiting_action`) until
/// `resume`. `call` receives the step's resolved parameters as JSON text and
/// returns the step's output as JSON text; throwing (`ActionError.Failed`, or
/// any other error) fails the step with the error's text. Calls arrive on a
/// worker thread, with no engine lock held, so a handler may use the store.
#[uniffi::export(with_foreign)]
pub trait ActionHandler: Send + Sync {
    /// The action names this handler runs.
    fn actions(&self) -> Vec<String>;
    /// Run `action` with `parameters` (JSON text); return its output (JSON text).
    fn call(&self, action: String, parameters: String) -> Result<String, ActionError>;
}

/// Progress of `optimize` and `import`, implemented in Swift or Kotlin.
/// Called on a worker thread, at each stage boundary and every few items; the
/// operation waits for it, so it should only hand the event on.
#[uniffi::export(with_foreign)]
pub trait ProgressListener: Send + Sync {
    /// One progress report.
    fn on_progress(&self, event: ProgressEvent);
}

/// The core's progress callback for an optional listener.
pub(crate) fn progress_fn(
    listener: Option<Arc<dyn ProgressListener>>,
) -> impl Fn(memstrata::admin::Progress) {
    move |p| {
        if let Some(l) = &listener {
            l.on_progress(p.into());
        }
    }
}

/// A foreign [`ActionHandler`] as the shared JSON-in/JSON-out adapter.
struct Host(Arc<dyn ActionHandler>);

impl JsonAction for Host {
    fn call(&self, action: &str, parameters: &Value) -> Result<Value, String> {
        let out = self
            .0
            .call(action.to_owned(), parameters.to_string())
            .map_err(|e| e.to_string())?;
        serde_json::from_str(&out)
            .map_err(|e| format!("the output of host action `{action}` is not valid JSON: {e}"))
    }
}

/// The core's action table for an optional host (empty: every host action pauses).
fn table(handler: Option<Arc<dyn ActionHandler>>) -> memstrata::procedural::Actions {
    match handler {
        Some(h) => {
            let names = h.actions();
            actions(names, Arc::new(Host(h)))
        }
        None => memstrata::procedural::Actions::new(),
    }
}

fn steps(text: &str) -> Result<Vec<memstrata::procedural::Step>, BindingError> {
    Ok(memstrata::procedural::steps_from_json(json(
        "steps", text,
    )?)?)
}

/// Procedural memory: learned step graphs that execute.
#[derive(Debug, uniffi::Object)]
pub struct Procedural {
    handle: Arc<Handle>,
}

impl Procedural {
    pub(crate) fn new(handle: Arc<Handle>) -> Self {
        Procedural { handle }
    }

    fn core(&self) -> Result<memstrata::Memory, MemstrataError> {
        Ok(self.handle.get()?)
    }
}

#[uniffi::export]
impl Procedural {
    /// Store a new procedure; `steps` is a JSON array of steps
    /// (`{id, description?, action, parameters?, next?}`, docs/procedures.md).
    pub async fn learn(
        &self,
        name: String,
        steps: String,
    ) -> Result<common::Procedure, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let steps = self::steps(&steps)?;
            Ok(mem.procedural().learn(&name, steps)?.into())
        })
        .await
    }

    /// Replace the steps of an existing procedure (`NotFound` otherwise).
    pub async fn update(
        &self,
        name: String,
        steps: String,
    ) -> Result<common::Procedure, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let steps = self::steps(&steps)?;
            Ok(mem.procedural().update(&name, steps)?.into())
        })
        .await
    }

    /// The procedure `name`, or null.
    pub async fn get(&self, name: String) -> Result<Option<common::Procedure>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.procedural().get(&name))
            .await
            .map(|p| p.map(Into::into))
    }

    /// Procedure names, sorted.
    pub async fn list(&self) -> Result<Vec<String>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.procedural().list()).await
    }

    /// Remove a procedure; true if it was there.
    pub async fn forget(&self, name: String) -> Result<bool, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.procedural().forget(&name)).await
    }

    /// Run procedure `name` with `params` (a JSON object, default `{}`).
    /// Host actions go to `handler` (then to engine-wide registered ones); a
    /// host action nobody handles pauses the run (`status == "awaiting_action"`).
    #[uniffi::method(default(params = None, handler = None))]
    pub async fn execute(
        &self,
        name: String,
        params: Option<String>,
        handler: Option<Arc<dyn ActionHandler>>,
    ) -> Result<Run, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let params = match params {
                Some(p) => json("params", &p)?,
                None => Value::Object(Default::default()),
            };
            Ok(mem
                .procedural()
                .execute(&name, params, &table(handler))?
                .into())
        })
        .await
    }

    /// Continue a paused run with `output` (JSON text, default null) as the
    /// pending action's output.
    #[uniffi::method(default(output = None, handler = None))]
    pub async fn resume(
        &self,
        run_id: String,
        output: Option<String>,
        handler: Option<Arc<dyn ActionHandler>>,
    ) -> Result<Run, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let output = opt_json("output", output.as_deref())?;
            Ok(mem
                .procedural()
                .resume(&run_id, output, &table(handler))?
                .into())
        })
        .await
    }

    /// The run `run_id`, or null.
    pub async fn run(&self, run_id: String) -> Result<Option<Run>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.procedural().run(&run_id))
            .await
            .map(|r| r.map(Into::into))
    }

    /// Install `handler` as the engine-wide handler of action `name`, used by
    /// every handle on this store (a handler passed to `execute` wins).
    pub fn register_action(
        &self,
        name: String,
        handler: Arc<dyn ActionHandler>,
    ) -> Result<(), MemstrataError> {
        let mem = self.core()?;
        let table = actions([name.clone()], Arc::new(Host(handler)));
        let action = table
            .get(&name)
            .cloned()
            .ok_or_else(|| BindingError::internal("action table lost its only entry"))?;
        Ok(common::guard(|| {
            mem.procedural().register_action(&name, action)
        })?)
    }

    /// Remove the engine-wide handler of `name`; true if there was one.
    pub fn unregister_action(&self, name: String) -> Result<bool, MemstrataError> {
        Ok(self.core()?.procedural().unregister_action(&name))
    }

    /// Names with an engine-wide handler, sorted.
    pub fn registered_actions(&self) -> Result<Vec<String>, MemstrataError> {
        Ok(self.core()?.procedural().registered_actions())
    }
}

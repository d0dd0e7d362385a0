//! `Memory.procedural`: procedures (step graphs) executed by the core, with
//! Python callables as host actions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use memstrata_bindings_common::{self as common, BindingError, Handle, JsonAction, callbacks};
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::Value;

use crate::convert;
use crate::error::{run, to_py};
use crate::memory::{HandleExt, max_depth};
use crate::records::{PyRepr as _, class, py_records, pystr};

/// The procedures of the active context (`mem.procedural`).
#[pyclass(frozen, module = "memstrata")]
#[derive(Debug)]
pub struct Procedural {
    h: Arc<Handle>,
}

impl Procedural {
    pub(crate) fn new(h: Arc<Handle>) -> Self {
        Procedural { h }
    }
}

/// Python callables as host actions, by name (the common layer's [`JsonAction`]).
/// A callable receives the step's resolved parameters and returns a JSON-like
/// output; an `Exception` it raises fails the step with `"<ExceptionType>: <message>"`.
/// A `BaseException` that is not an `Exception` (KeyboardInterrupt, SystemExit)
/// also fails the step, and is re-raised to the caller once the core returns
/// ([`PyActions::reraise_escaped`]).
///
/// The core calls an action on the thread that called `execute`/`resume`, with
/// the GIL released (`run`); the action takes the GIL back for the call, so it
/// may call into the same `Memory` (which releases it again).
#[derive(Debug)]
struct PyActions {
    funcs: HashMap<String, Py<PyAny>>,
    max_depth: usize,
    escaped: Mutex<Option<PyErr>>,
}

impl JsonAction for PyActions {
    fn call(&self, action: &str, parameters: &Value) -> Result<Value, String> {
        Python::attach(|py| {
            let Some(func) = self.funcs.get(action) else {
                return Err(format!("no host action {action:?}"));
            };
            let arg = convert::to_py(py, parameters).map_err(|e| describe(py, &e))?;
            match func.call1(py, (arg,)) {
                Ok(out) => convert::to_json(out.bind(py), "output", self.max_depth)
                    .map_err(|e| describe(py, &e)),
                Err(e) => {
                    let msg = describe(py, &e);
                    if !e.is_instance_of::<PyException>(py) {
                        *self.escaped.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                    }
                    Err(msg)
                }
            }
        })
    }
}

impl PyActions {
    /// Callables by name; each must be callable (`field` names the argument in the error).
    fn new<'py>(
        entries: impl IntoIterator<Item = (String, String, Bound<'py, PyAny>)>,
        max_depth: usize,
    ) -> PyResult<Arc<PyActions>> {
        let mut funcs = HashMap::new();
        for (name, field, func) in entries {
            if !func.is_callable() {
                return Err(PyTypeError::new_err(format!(
                    "{field}: expected a callable, got {}",
                    func.get_type().name()?
                )));
            }
            funcs.insert(name, func.unbind());
        }
        Ok(Arc::new(PyActions {
            funcs,
            max_depth,
            escaped: Mutex::new(None),
        }))
    }

    /// `actions={"name": callable}` (or None).
    fn from_arg(actions: Option<&Bound<'_, PyAny>>, max_depth: usize) -> PyResult<Arc<PyActions>> {
        let mut entries = Vec::new();
        if let Some(actions) = actions.filter(|a| !a.is_none()) {
            let dict = actions.cast::<PyDict>().map_err(|_| {
                PyTypeError::new_err("actions: expected a dict of {name: callable}")
            })?;
            for (k, v) in dict.iter() {
                let name = k
                    .cast::<PyString>()
                    .map_err(|_| PyTypeError::new_err("actions: keys must be str (action names)"))?
                    .to_cow()?
                    .into_owned();
                let field = format!("actions[{}]", pystr(&name));
                entries.push((name, field, v));
            }
        }
        PyActions::new(entries, max_depth)
    }

    /// The core's action table: one handler per name, each calling back into `self`.
    fn table(self: &Arc<Self>) -> memstrata::procedural::Actions {
        callbacks::actions(
            self.funcs.keys().cloned(),
            Arc::clone(self) as Arc<dyn JsonAction>,
        )
    }

    /// Re-raise a KeyboardInterrupt / SystemExit an action raised during the call.
    fn reraise_escaped(&self) -> PyResult<()> {
        match self
            .escaped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Run `f` (an `execute` or `resume`) without the GIL, with the `actions=` argument
/// as its action table; then re-raise a KeyboardInterrupt / SystemExit an action raised.
fn with_actions(
    py: Python<'_>,
    mem: &memstrata::Memory,
    actions: Option<&Bound<'_, PyAny>>,
    f: impl Send
    + FnOnce(&memstrata::procedural::Actions) -> memstrata::Result<memstrata::procedural::Run>,
) -> PyResult<Run> {
    let host = PyActions::from_arg(actions, max_depth(mem))?;
    let table = host.table();
    let r = run(py, || f(&table));
    // The handlers hold Python objects: release them here, with the GIL.
    drop(table);
    host.reraise_escaped()?;
    class(py, r?)
}

/// `"ValueError: message"` for an exception raised by host code (a procedure
/// action or the embedder).
pub(crate) fn describe(py: Python<'_>, e: &PyErr) -> String {
    let ty = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".to_owned());
    let msg = e.value(py).str().map(|s| s.to_string()).unwrap_or_default();
    if msg.is_empty() {
        ty
    } else {
        format!("{ty}: {msg}")
    }
}

fn steps_arg(
    steps: &Bound<'_, PyAny>,
    max_depth: usize,
) -> PyResult<Vec<memstrata::procedural::Step>> {
    let value = convert::to_json(steps, "steps", max_depth)?;
    memstrata::procedural::steps_from_json(value).map_err(to_py)
}

#[pymethods]
impl Procedural {
    /// Store a new procedure: a list of steps
    /// `{"id", "description", "action", "parameters", "next"}`. The graph is validated
    /// (unique ids, every `next` exists, conditions compile); ConflictError if `name` exists.
    fn learn(&self, py: Python<'_>, name: String, steps: &Bound<'_, PyAny>) -> PyResult<Procedure> {
        let mem = self.h.core()?;
        let steps = steps_arg(steps, max_depth(&mem))?;
        let p = run(py, || mem.procedural().learn(&name, steps))?;
        class(py, p)
    }

    /// Replace the steps of an existing procedure (NotFoundError otherwise); bumps its version.
    fn update(
        &self,
        py: Python<'_>,
        name: String,
        steps: &Bound<'_, PyAny>,
    ) -> PyResult<Procedure> {
        let mem = self.h.core()?;
        let steps = steps_arg(steps, max_depth(&mem))?;
        let p = run(py, || mem.procedural().update(&name, steps))?;
        class(py, p)
    }

    /// The procedure `name`, or None.
    fn get(&self, py: Python<'_>, name: String) -> PyResult<Option<Procedure>> {
        let mem = self.h.core()?;
        let p = run(py, || mem.procedural().get(&name))?;
        p.map(|p| class(py, p)).transpose()
    }

    /// Names of the procedures of this context, sorted.
    fn list(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mem = self.h.core()?;
        run(py, || mem.procedural().list())
    }

    /// Delete a procedure; True when it existed. Its runs are kept.
    fn forget(&self, py: Python<'_>, name: String) -> PyResult<bool> {
        let mem = self.h.core()?;
        run(py, || mem.procedural().forget(&name))
    }

    /// Run procedure `name` with `params` (a dict). `actions` maps host action names
    /// to callables `f(parameters: dict) -> JSON-like`. A step whose action has no
    /// handler pauses the run (`status == "awaiting_action"`); continue with `resume`.
    #[pyo3(signature = (name, params=None, actions=None))]
    fn execute(
        &self,
        py: Python<'_>,
        name: String,
        params: Option<&Bound<'_, PyAny>>,
        actions: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Run> {
        let mem = self.h.core()?;
        let params = convert::opt_json(params, "params", max_depth(&mem))?;
        with_actions(py, &mem, actions, |table| {
            mem.procedural().execute(&name, params, table)
        })
    }

    /// Continue a run paused on a step: `output` becomes that step's output.
    /// NotFoundError for an unknown run, ConflictError when it is not awaiting an action.
    #[pyo3(signature = (run_id, output=None, actions=None))]
    fn resume(
        &self,
        py: Python<'_>,
        run_id: String,
        output: Option<&Bound<'_, PyAny>>,
        actions: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Run> {
        let mem = self.h.core()?;
        let output = convert::opt_json(output, "output", max_depth(&mem))?;
        with_actions(py, &mem, actions, |table| {
            mem.procedural().resume(&run_id, output, table)
        })
    }

    /// The run `run_id` (any context), or None.
    fn run(&self, py: Python<'_>, run_id: String) -> PyResult<Option<Run>> {
        let mem = self.h.core()?;
        let r = run(py, || mem.procedural().run(&run_id))?;
        r.map(|r| class(py, r)).transpose()
    }

    /// Register a host action for every handle on this store (replacing one of the
    /// same name). Per-call `actions=` take precedence. Built-in names are refused.
    fn register_action(
        &self,
        py: Python<'_>,
        name: String,
        action: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let mem = self.h.core()?;
        // Engine-wide handlers outlive any one call: a KeyboardInterrupt they raise
        // only fails the step.
        let host = PyActions::new(
            [(name.clone(), "action".to_owned(), action.clone())],
            max_depth(&mem),
        )?;
        let Some(h) = host.table().remove(&name) else {
            return Err(to_py(BindingError::internal(
                "no handler built for the action",
            )));
        };
        run(py, || mem.procedural().register_action(&name, h))
    }

    /// Remove an engine-wide host action; True when it was registered.
    fn unregister_action(&self, py: Python<'_>, name: String) -> PyResult<bool> {
        let mem = self.h.core()?;
        run(py, || {
            Ok::<_, BindingError>(mem.procedural().unregister_action(&name))
        })
    }

    /// Names of the engine-wide host actions, sorted.
    fn registered_actions(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mem = self.h.core()?;
        run(py, || {
            Ok::<_, BindingError>(mem.procedural().registered_actions())
        })
    }

    fn __repr__(&self) -> String {
        "<memstrata.Procedural>".to_owned()
    }
}

py_records! {
    /// A stored procedure.
    Procedure from common::Procedure, repr custom {
        /// Name (unique per context).
        name: String,
        /// The steps as dicts (`id`, `description`, `action`, `parameters`, `next`).
        steps: Py<PyAny>,
        /// 1 on learn, +1 on every update.
        version: i64,
        /// When it was learned (aware UTC).
        created_at: DateTime<Utc>,
        /// When it last changed (aware UTC).
        updated_at: DateTime<Utc>,
    }

    /// The step a paused run waits on.
    PendingAction from common::PendingAction, repr [step, action, parameters] {
        /// Step id.
        step: String,
        /// The step's description.
        description: String,
        /// Action name.
        action: String,
        /// Resolved parameters.
        parameters: Py<PyAny>,
    }

    /// One executed step of a run.
    TraceEntry from common::TraceEntry, repr [step, action, output, error] {
        /// Step id.
        step: String,
        /// Action name.
        action: String,
        /// Resolved parameters.
        parameters: Py<PyAny>,
        /// Output (None when the step failed).
        output: Py<PyAny>,
        /// Why the step failed, if it did.
        error: Option<String>,
        /// When the step finished (aware UTC).
        at: DateTime<Utc>,
    }

    /// A procedure run, as returned by `execute`, `resume` and `run`.
    Run from common::Run, repr custom {
        /// UUIDv7 id.
        run_id: String,
        /// Procedure name.
        procedure: String,
        /// Version of the procedure the run executes.
        procedure_version: i64,
        /// Context the run's built-in actions operate in.
        context: String,
        /// "running", "awaiting_action", "completed" or "failed".
        status: String,
        /// The params given to execute.
        params: Py<PyAny>,
        /// Output of each executed step, by step id.
        outputs: Py<PyAny>,
        /// Every executed step, in order.
        trace: Vec<Py<TraceEntry>>,
        /// The awaited step when status is "awaiting_action".
        pending: Option<Py<PendingAction>>,
        /// Why the run failed.
        error: Option<String>,
        /// Steps started so far.
        steps_executed: i64,
        /// Id of the episode recorded when the run finished.
        episode_id: Option<String>,
        /// When execute was called (aware UTC).
        started_at: DateTime<Utc>,
        /// When it completed or failed.
        finished_at: Option<DateTime<Utc>>,
    }
}

impl Procedure {
    fn repr(&self, py: Python<'_>) -> String {
        let n = self.steps.bind(py).len().unwrap_or(0);
        format!(
            "Procedure(name={}, steps=<{n} steps>, version={}, updated_at={})",
            pystr(&self.name),
            self.version,
            self.updated_at.py_repr(py)
        )
    }
}

impl Run {
    fn repr(&self, py: Python<'_>) -> String {
        let mut s = format!(
            "Run(run_id={}, procedure={}, status={}, steps_executed={}",
            pystr(&self.run_id),
            pystr(&self.procedure),
            pystr(&self.status),
            self.steps_executed
        );
        if let Some(p) = &self.pending {
            let p = p.get();
            s.push_str(&format!(
                ", pending=<{} {}>",
                pystr(&p.step),
                pystr(&p.action)
            ));
        }
        if let Some(e) = &self.error {
            s.push_str(&format!(", error={}", pystr(e)));
        }
        s.push_str(&format!(", finished_at={})", self.finished_at.py_repr(py)));
        s
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Procedural>()?;
    m.add_class::<Procedure>()?;
    m.add_class::<Run>()?;
    m.add_class::<PendingAction>()?;
    m.add_class::<TraceEntry>()?;
    Ok(())
}

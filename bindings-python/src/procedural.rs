//! `Memory.procedural`: procedures (step graphs) executed by the core, with
//! Python callables as host actions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::Value;

use crate::convert;
use crate::error::{run, to_py};
use crate::memory::{Handle, max_depth};
use crate::repr::{dt, opt_dt, pystr};

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

/// A Python callable used as a host action. It receives the step's resolved
/// parameters and returns a JSON-like output; an `Exception` it raises fails the
/// step with `"<ExceptionType>: <message>"`. A `BaseException` that is not an
/// `Exception` (KeyboardInterrupt, SystemExit) also fails the step, and is
/// re-raised to the caller once the core returns.
#[derive(Debug)]
struct PyAction {
    func: Py<PyAny>,
    max_depth: usize,
    escaped: Arc<Mutex<Option<PyErr>>>,
}

impl memstrata::ActionHandler for PyAction {
    fn call(&self, parameters: &Value) -> Result<Value, String> {
        Python::attach(|py| {
            let arg = convert::to_py(py, parameters).map_err(|e| describe(py, &e))?;
            match self.func.call1(py, (arg,)) {
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

/// `"ValueError: message"` for an exception raised by a host action.
fn describe(py: Python<'_>, e: &PyErr) -> String {
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

/// `actions={"name": callable}` -> the core's per-call action map.
fn actions_from(
    actions: Option<&Bound<'_, PyAny>>,
    max_depth: usize,
    escaped: &Arc<Mutex<Option<PyErr>>>,
) -> PyResult<memstrata::Actions> {
    let mut out: memstrata::Actions = HashMap::new();
    let Some(actions) = actions else {
        return Ok(out);
    };
    if actions.is_none() {
        return Ok(out);
    }
    let dict = actions
        .cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err("actions: expected a dict of {name: callable}"))?;
    for (k, v) in dict.iter() {
        let name = k
            .cast::<PyString>()
            .map_err(|_| PyTypeError::new_err("actions: keys must be str (action names)"))?
            .to_cow()?
            .into_owned();
        out.insert(
            name.clone(),
            handler(
                &v,
                &format!("actions[{}]", pystr(&name)),
                max_depth,
                escaped,
            )?,
        );
    }
    Ok(out)
}

fn handler(
    func: &Bound<'_, PyAny>,
    field: &str,
    max_depth: usize,
    escaped: &Arc<Mutex<Option<PyErr>>>,
) -> PyResult<Arc<dyn memstrata::ActionHandler>> {
    if !func.is_callable() {
        return Err(PyTypeError::new_err(format!(
            "{field}: expected a callable, got {}",
            func.get_type().name()?
        )));
    }
    Ok(Arc::new(PyAction {
        func: func.clone().unbind(),
        max_depth,
        escaped: Arc::clone(escaped),
    }))
}

/// Re-raise a KeyboardInterrupt / SystemExit a host action raised during the call.
fn reraise_escaped(escaped: &Arc<Mutex<Option<PyErr>>>) -> PyResult<()> {
    match escaped
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn steps_arg(steps: &Bound<'_, PyAny>, max_depth: usize) -> PyResult<Vec<memstrata::Step>> {
    let value = convert::to_json(steps, "steps", max_depth)?;
    memstrata::procedural::steps_from_json(value).map_err(to_py)
}

#[pymethods]
impl Procedural {
    /// Store a new procedure: a list of steps
    /// `{"id", "description", "action", "parameters", "next"}`. The graph is validated
    /// (unique ids, every `next` exists, conditions compile); ConflictError if `name` exists.
    fn learn(&self, py: Python<'_>, name: String, steps: &Bound<'_, PyAny>) -> PyResult<Procedure> {
        let mem = self.h.get()?;
        let steps = steps_arg(steps, max_depth(&mem))?;
        let p = run(py, || mem.procedural().learn(&name, steps))?;
        Procedure::from_core(py, p)
    }

    /// Replace the steps of an existing procedure (NotFoundError otherwise); bumps its version.
    fn update(
        &self,
        py: Python<'_>,
        name: String,
        steps: &Bound<'_, PyAny>,
    ) -> PyResult<Procedure> {
        let mem = self.h.get()?;
        let steps = steps_arg(steps, max_depth(&mem))?;
        let p = run(py, || mem.procedural().update(&name, steps))?;
        Procedure::from_core(py, p)
    }

    /// The procedure `name`, or None.
    fn get(&self, py: Python<'_>, name: String) -> PyResult<Option<Procedure>> {
        let mem = self.h.get()?;
        let p = run(py, || mem.procedural().get(&name))?;
        p.map(|p| Procedure::from_core(py, p)).transpose()
    }

    /// Names of the procedures of this context, sorted.
    fn list(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mem = self.h.get()?;
        run(py, || mem.procedural().list())
    }

    /// Delete a procedure; True when it existed. Its runs are kept.
    fn forget(&self, py: Python<'_>, name: String) -> PyResult<bool> {
        let mem = self.h.get()?;
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
        let mem = self.h.get()?;
        let depth = max_depth(&mem);
        let params = convert::opt_json(params, "params", depth)?;
        let escaped = Arc::new(Mutex::new(None));
        let actions = actions_from(actions, depth, &escaped)?;
        let r = run(py, || mem.procedural().execute(&name, params, &actions));
        drop(actions);
        reraise_escaped(&escaped)?;
        Run::from_core(py, r?)
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
        let mem = self.h.get()?;
        let depth = max_depth(&mem);
        let output = convert::opt_json(output, "output", depth)?;
        let escaped = Arc::new(Mutex::new(None));
        let actions = actions_from(actions, depth, &escaped)?;
        let r = run(py, || mem.procedural().resume(&run_id, output, &actions));
        drop(actions);
        reraise_escaped(&escaped)?;
        Run::from_core(py, r?)
    }

    /// The run `run_id` (any context), or None.
    fn run(&self, py: Python<'_>, run_id: String) -> PyResult<Option<Run>> {
        let mem = self.h.get()?;
        let r = run(py, || mem.procedural().run(&run_id))?;
        r.map(|r| Run::from_core(py, r)).transpose()
    }

    /// Register a host action for every handle on this store (replacing one of the
    /// same name). Per-call `actions=` take precedence. Built-in names are refused.
    fn register_action(
        &self,
        py: Python<'_>,
        name: String,
        action: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let mem = self.h.get()?;
        // Engine-wide handlers outlive any one call: a KeyboardInterrupt they raise
        // only fails the step.
        let h = handler(
            action,
            "action",
            max_depth(&mem),
            &Arc::new(Mutex::new(None)),
        )?;
        run(py, || mem.procedural().register_action(&name, h))
    }

    /// Remove an engine-wide host action; True when it was registered.
    fn unregister_action(&self, py: Python<'_>, name: String) -> PyResult<bool> {
        let mem = self.h.get()?;
        run(py, || Ok(mem.procedural().unregister_action(&name)))
    }

    /// Names of the engine-wide host actions, sorted.
    fn registered_actions(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mem = self.h.get()?;
        run(py, || Ok(mem.procedural().registered_actions()))
    }

    fn __repr__(&self) -> String {
        "<memstrata.Procedural>".to_owned()
    }
}

/// A stored procedure.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct Procedure {
    /// Name (unique per context).
    pub name: String,
    /// The steps as dicts (`id`, `description`, `action`, `parameters`, `next`).
    pub steps: Py<PyAny>,
    /// 1 on learn, +1 on every update.
    pub version: u64,
    /// When it was learned (aware UTC).
    pub created_at: DateTime<Utc>,
    /// When it last changed (aware UTC).
    pub updated_at: DateTime<Utc>,
}

impl Procedure {
    fn from_core(py: Python<'_>, p: memstrata::Procedure) -> PyResult<Self> {
        Ok(Procedure {
            steps: convert::to_py(
                py,
                &serde_json::to_value(&p.steps).map_err(convert::ser_err)?,
            )?,
            name: p.name,
            version: p.version,
            created_at: p.created_at,
            updated_at: p.updated_at,
        })
    }
}

#[pymethods]
impl Procedure {
    fn __repr__(&self, py: Python<'_>) -> String {
        let n = self.steps.bind(py).len().unwrap_or(0);
        format!(
            "Procedure(name={}, steps=<{n} steps>, version={}, updated_at={})",
            pystr(&self.name),
            self.version,
            dt(&self.updated_at)
        )
    }
}

/// The step a paused run waits on.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct PendingAction {
    /// Step id.
    pub step: String,
    /// The step's description.
    pub description: String,
    /// Action name.
    pub action: String,
    /// Resolved parameters.
    pub parameters: Py<PyAny>,
}

#[pymethods]
impl PendingAction {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "PendingAction(step={}, action={}, parameters={})",
            pystr(&self.step),
            pystr(&self.action),
            crate::repr::obj(py, &self.parameters)
        )
    }
}

/// One executed step of a run.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct TraceEntry {
    /// Step id.
    pub step: String,
    /// Action name.
    pub action: String,
    /// Resolved parameters.
    pub parameters: Py<PyAny>,
    /// Output (None when the step failed).
    pub output: Py<PyAny>,
    /// Why the step failed, if it did.
    pub error: Option<String>,
    /// When the step finished (aware UTC).
    pub at: DateTime<Utc>,
}

#[pymethods]
impl TraceEntry {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "TraceEntry(step={}, action={}, output={}, error={})",
            pystr(&self.step),
            pystr(&self.action),
            crate::repr::obj(py, &self.output),
            self.error
                .as_deref()
                .map(pystr)
                .unwrap_or_else(|| "None".to_owned())
        )
    }
}

/// A procedure run, as returned by `execute`, `resume` and `run`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct Run {
    /// UUIDv7 id.
    pub run_id: String,
    /// Procedure name.
    pub procedure: String,
    /// Version of the procedure the run executes.
    pub procedure_version: u64,
    /// Context the run's built-in actions operate in.
    pub context: String,
    /// "running", "awaiting_action", "completed" or "failed".
    pub status: String,
    /// The params given to execute.
    pub params: Py<PyAny>,
    /// Output of each executed step, by step id.
    pub outputs: Py<PyAny>,
    /// Every executed step, in order.
    pub trace: Vec<Py<TraceEntry>>,
    /// The awaited step when status is "awaiting_action".
    pub pending: Option<Py<PendingAction>>,
    /// Why the run failed.
    pub error: Option<String>,
    /// Steps started so far.
    pub steps_executed: u64,
    /// Id of the episode recorded when the run finished.
    pub episode_id: Option<String>,
    /// When execute was called (aware UTC).
    pub started_at: DateTime<Utc>,
    /// When it completed or failed.
    pub finished_at: Option<DateTime<Utc>>,
}

impl Run {
    fn from_core(py: Python<'_>, r: memstrata::Run) -> PyResult<Self> {
        let trace = r
            .trace
            .into_iter()
            .map(|t| {
                Py::new(
                    py,
                    TraceEntry {
                        parameters: convert::to_py(py, &t.parameters)?,
                        output: convert::to_py(py, &t.output)?,
                        step: t.step,
                        action: t.action,
                        error: t.error,
                        at: t.at,
                    },
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        let pending = r
            .pending
            .map(|p| {
                Py::new(
                    py,
                    PendingAction {
                        parameters: convert::to_py(py, &p.parameters)?,
                        step: p.step,
                        description: p.description,
                        action: p.action,
                    },
                )
            })
            .transpose()?;
        Ok(Run {
            params: convert::to_py(py, &r.params)?,
            outputs: convert::to_py(py, &Value::Object(r.outputs))?,
            status: r.status.as_str().to_owned(),
            run_id: r.run_id,
            procedure: r.procedure,
            procedure_version: r.procedure_version,
            context: r.context,
            trace,
            pending,
            error: r.error,
            steps_executed: r.steps_executed,
            episode_id: r.episode_id,
            started_at: r.started_at,
            finished_at: r.finished_at,
        })
    }
}

#[pymethods]
impl Run {
    fn __repr__(&self) -> String {
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
        s.push_str(&format!(
            ", finished_at={})",
            opt_dt(self.finished_at.as_ref())
        ));
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

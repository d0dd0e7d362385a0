//! JS callbacks the engine calls from its worker thread: host actions of procedures,
//! `onProgress` of `optimize` / `import`, and the embedder of `Memory.setEmbedder`.
//!
//! Each JS function becomes a weak (unref'd) threadsafe function. The engine thread
//! queues a call and waits for its outcome; the JS thread runs the function and, when
//! it returns a Promise, settles it on its own turn. So the event loop is never
//! blocked, and an action may itself call back into the same `Memory`: that call runs
//! on another pool thread, and the core holds no lock while an action runs.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc;

use memstrata_bindings_common::{BindingError, JsonAction, JsonValue, ProgressEvent};
use napi::JsValue as _;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use serde_json::Value;

type BResult<T> = std::result::Result<T, BindingError>;

/// What a host action returns: a JSON value, or a Promise of one (told apart on the JS thread).
pub(crate) type ActionReturn = Unknown<'static>;
type ActionFn = ThreadsafeFunction<JsonValue, ActionReturn, JsonValue, Status, false, true>;
type EmbedFn = ThreadsafeFunction<Vec<String>, Unknown<'static>, Vec<String>, Status, false, true>;
type ProgressFn =
    ThreadsafeFunction<ProgressEvent, Unknown<'static>, ProgressEvent, Status, false, true>;

/// Host actions by name, callable from any thread.
pub(crate) struct JsActions {
    fns: HashMap<String, ActionFn>,
}

impl JsActions {
    /// `{ name: fn }` from a JS object (`field` names it in errors).
    pub(crate) fn from_object(obj: &Object<'_>, field: &str) -> BResult<JsActions> {
        let mut fns = HashMap::new();
        let keys = Object::keys(obj).map_err(|e| BindingError::invalid(field, e.reason.clone()))?;
        for name in keys {
            let f: Option<Function<'_, JsonValue, ActionReturn>> =
                obj.get(&name).map_err(|_| {
                    BindingError::invalid(&format!("{field}.{name}"), "must be a function")
                })?;
            let Some(f) = f else { continue };
            fns.insert(name.clone(), action_fn(&f, &format!("{field}.{name}"))?);
        }
        Ok(JsActions { fns })
    }

    /// One action.
    pub(crate) fn single(
        f: &Function<'_, JsonValue, ActionReturn>,
        name: &str,
    ) -> BResult<JsActions> {
        let mut fns = HashMap::new();
        fns.insert(name.to_owned(), action_fn(f, "action")?);
        Ok(JsActions { fns })
    }

    /// The core's action table (the names this host handles).
    pub(crate) fn table(self) -> memstrata::procedural::Actions {
        let names: Vec<String> = self.fns.keys().cloned().collect();
        memstrata_bindings_common::actions(names, Arc::new(self))
    }
}

fn action_fn(f: &Function<'_, JsonValue, ActionReturn>, field: &str) -> BResult<ActionFn> {
    f.build_threadsafe_function::<JsonValue>()
        .weak::<true>()
        .build()
        .map_err(|e| {
            BindingError::invalid(
                field,
                format!("cannot call this function from the engine: {e}"),
            )
        })
}

/// `Error: message` for what a JS action threw or rejected with.
fn describe(e: &Error) -> String {
    let reason = e.reason.trim();
    if reason.is_empty() {
        "the action threw".to_owned()
    } else {
        reason.to_owned()
    }
}

impl JsonAction for JsActions {
    fn call(&self, action: &str, parameters: &Value) -> std::result::Result<Value, String> {
        let Some(f) = self.fns.get(action) else {
            return Err(format!("no host action {action:?}"));
        };
        let (tx, rx) = mpsc::channel::<std::result::Result<Value, String>>();
        let status = f.call_with_return_value(
            JsonValue(parameters.clone()),
            ThreadsafeFunctionCallMode::Blocking,
            move |ret: Result<ActionReturn>, _env| {
                match ret {
                    Err(e) => {
                        let _ = tx.send(Err(describe(&e)));
                    }
                    Ok(v) if v.is_promise().unwrap_or(false) => {
                        match Promise::<JsonValue>::from_unknown(v) {
                            // Settled on a later turn of the event loop; wait for it off-thread.
                            Ok(promise) => {
                                napi::bindgen_prelude::spawn(async move {
                                    let out = promise.await.map(|v| v.0).map_err(|e| describe(&e));
                                    let _ = tx.send(out);
                                });
                            }
                            Err(e) => {
                                let _ = tx.send(Err(describe(&e)));
                            }
                        }
                    }
                    Ok(v) => {
                        let _ = tx.send(JsonValue::from_unknown(v).map(|v| v.0).map_err(|e| {
                            format!(
                                "the action returned a value that is not JSON: {}",
                                describe(&e)
                            )
                        }));
                    }
                }
                Ok(())
            },
        );
        if status != Status::Ok {
            return Err(format!(
                "the JavaScript action could not be called ({status})"
            ));
        }
        rx.recv().unwrap_or_else(|_| {
            Err("the JavaScript environment went away before the action returned".to_owned())
        })
    }
}

/// An `onProgress` callback: each report is delivered before the engine goes on, so
/// every report has reached JS when the operation's Promise settles.
pub(crate) struct JsProgress(ProgressFn);

impl JsProgress {
    pub(crate) fn new(f: &Function<'_, ProgressEvent, Unknown<'static>>) -> BResult<JsProgress> {
        f.build_threadsafe_function::<ProgressEvent>()
            .weak::<true>()
            .build()
            .map(JsProgress)
            .map_err(|e| {
                BindingError::invalid("onProgress", format!("cannot call this function: {e}"))
            })
    }

    pub(crate) fn report(&self, ev: ProgressEvent) {
        let (tx, rx) = mpsc::channel::<()>();
        let status =
            self.0
                .call_with_return_value(ev, ThreadsafeFunctionCallMode::Blocking, move |_, _| {
                    let _ = tx.send(());
                    Ok(())
                });
        if status == Status::Ok {
            // An exception thrown by onProgress is ignored: progress is advisory.
            let _ = rx.recv();
        }
    }
}

/// The JS function of `Memory.setEmbedder` as the engine's embedder:
/// `fn(texts: string[]) => (Float32Array | Float64Array | number[])[]`, or a Promise of that.
///
/// Called through the same weak threadsafe function as host actions: the engine's
/// worker thread queues the call and waits; the JS thread runs the function and, for
/// a Promise, awaits it on a later turn. Every storage method runs on the worker
/// pool, so the JS thread never waits for itself; a call that would (the engine
/// asking for an embedding on the JS thread that owns the function) is refused
/// with an error instead of deadlocking.
pub(crate) struct JsEmbedder {
    f: EmbedFn,
    js_thread: std::thread::ThreadId,
}

impl JsEmbedder {
    pub(crate) fn new(f: &Function<'_, Vec<String>, Unknown<'static>>) -> BResult<JsEmbedder> {
        let f = f
            .build_threadsafe_function::<Vec<String>>()
            .weak::<true>()
            .build()
            .map_err(|e| {
                BindingError::invalid(
                    "embedder",
                    format!("cannot call this function from the engine: {e}"),
                )
            })?;
        Ok(JsEmbedder {
            f,
            js_thread: std::thread::current().id(),
        })
    }
}

/// The message of what the embedder threw, rejected with, or returned wrongly.
fn reason(e: &Error) -> String {
    match e.reason.trim() {
        "" => "(no message)".to_owned(),
        r => r.to_owned(),
    }
}

/// What an embedder returned: one vector per text.
struct Vectors(Vec<Vec<f64>>);

fn vectors_from_js(v: &Unknown<'_>) -> Result<Vectors> {
    let shape = || {
        Error::new(
            Status::InvalidArg,
            "must return an array with one vector (Float32Array or number[]) per text",
        )
    };
    if v.get_type()? != ValueType::Object || !v.is_array()? {
        return Err(shape());
    }
    let arr = Array::from_unknown(*v)?;
    let mut out = Vec::with_capacity(arr.len() as usize);
    for i in 0..arr.len() {
        let el = arr.get::<Unknown<'_>>(i)?.ok_or_else(shape)?;
        out.push(memstrata_bindings_common::embedding_from_js(
            &el,
            &format!("result[{i}]"),
        )?);
    }
    Ok(Vectors(out))
}

impl TypeName for Vectors {
    fn type_name() -> &'static str {
        "Array<Float32Array | number[]>"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ValidateNapiValue for Vectors {}

#[allow(unsafe_code)] // napi's conversion trait is an `unsafe fn`; this only reads the value.
impl FromNapiValue for Vectors {
    unsafe fn from_napi_value(env: napi::sys::napi_env, v: napi::sys::napi_value) -> Result<Self> {
        // SAFETY: `v` is a live value of `env`, as napi guarantees for this call.
        let value = unsafe { Unknown::from_raw_unchecked(env, v) };
        vectors_from_js(&value)
    }
}

impl memstrata::Embedder for JsEmbedder {
    fn embed(&self, texts: &[&str]) -> memstrata::Result<Vec<Vec<f32>>> {
        let fail = |reason: String| memstrata::Error::invalid("embedder", reason);
        if std::thread::current().id() == self.js_thread {
            return Err(fail(
                "the JavaScript embedder cannot be called on the JavaScript thread that set it \
                 (it would wait for itself)"
                    .to_owned(),
            ));
        }
        let (tx, rx) = mpsc::channel::<std::result::Result<Vectors, String>>();
        let status = self.f.call_with_return_value(
            texts.iter().map(|t| (*t).to_owned()).collect(),
            ThreadsafeFunctionCallMode::Blocking,
            move |ret: Result<Unknown<'static>>, _env| {
                match ret {
                    Err(e) => {
                        let _ = tx.send(Err(format!("the embedder threw: {}", reason(&e))));
                    }
                    Ok(v) if v.is_promise().unwrap_or(false) => {
                        match Promise::<Vectors>::from_unknown(v) {
                            // Settled on a later turn of the event loop; wait for it off-thread.
                            Ok(promise) => {
                                napi::bindgen_prelude::spawn(async move {
                                    let out = promise.await.map_err(|e| {
                                        if e.status == Status::InvalidArg {
                                            format!("the embedder {}", reason(&e))
                                        } else {
                                            format!("the embedder rejected: {}", reason(&e))
                                        }
                                    });
                                    let _ = tx.send(out);
                                });
                            }
                            Err(e) => {
                                let _ = tx.send(Err(format!("the embedder {}", reason(&e))));
                            }
                        }
                    }
                    Ok(v) => {
                        let _ = tx.send(
                            vectors_from_js(&v).map_err(|e| format!("the embedder {}", reason(&e))),
                        );
                    }
                }
                Ok(())
            },
        );
        if status != Status::Ok {
            return Err(fail(format!(
                "the JavaScript embedder could not be called ({status})"
            )));
        }
        let vectors = rx
            .recv()
            .unwrap_or_else(|_| {
                Err("the JavaScript environment went away before the embedder returned".to_owned())
            })
            .map_err(fail)?;
        vectors
            .0
            .iter()
            .map(|v| memstrata_bindings_common::embedding_from_f64("embedder", v))
            .collect()
    }
}

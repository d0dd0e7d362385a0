//! The error choke point: a [`BindingError`] becomes a JS `Error` carrying `code`
//! (`"NOT_FOUND"`, `"INVALID_INPUT"`, ..., `"CLOSED"`, `"INTERNAL"`) and `field`;
//! `index.js` gives it the `MemstrataError` prototype.

use memstrata_bindings_common::BindingError;
use napi::bindgen_prelude::*;

/// The JS error for `e`, as a napi error that rejects (or throws) that very object.
pub(crate) fn to_napi(env: &Env, e: BindingError) -> Error {
    match build(env, &e) {
        Ok(err) => err,
        // Creating the object failed (the env is shutting down): a plain error with the code.
        Err(_) => Error::new(Status::GenericFailure, format!("{}: {}", e.code, e.message)),
    }
}

fn build(env: &Env, e: &BindingError) -> Result<Error> {
    let mut obj = env.create_error(Error::new(Status::GenericFailure, e.message.clone()))?;
    obj.set_named_property("code", e.code.as_str())?;
    obj.set_named_property("field", e.field.as_deref())?;
    if let Some(p) = &e.path {
        obj.set_named_property("path", p.to_string_lossy().into_owned())?;
    }
    if let Some(n) = e.os_error {
        obj.set_named_property("errno", n)?;
    }
    Ok(Error::from(obj.to_unknown()))
}

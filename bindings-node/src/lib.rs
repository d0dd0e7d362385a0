//! Node/TypeScript binding of Memstrata (npm package `memstrata`).

use napi_derive::napi;

/// The version of this binding.
#[napi]
pub fn core_version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

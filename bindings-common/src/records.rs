//! Result records: what every binding returns, flattened for every language.
//!
//! One struct per core result, with the field names of the core (snake_case;
//! napi presents them in camelCase, uniffi in each language's case). Compared
//! with the core's own types they are *flattened* for foreign languages:
//!
//! - timestamps are [`Timestamp`], values are [`JsonValue`];
//! - counts, sizes and versions are `i64` (a JS `number`, never a `BigInt`);
//!   importance and compression levels are `u32`; scores and durations `f64`;
//! - enums that are words on the wire (`status: "healthy"`, `"awaiting_action"`,
//!   `"open"`) are strings, documented with their values;
//! - maps are `HashMap<String, _>`.
//!
//! They derive `Serialize` (exactly the JSON the MCP tools return), and, behind
//! features, `schemars::JsonSchema` (`schema`), `uniffi::Record` (`uniffi`) and
//! `#[napi(object)]` (`napi`).

use std::collections::HashMap;

use serde::Serialize;

use crate::types::{JsonValue, Timestamp, int, score};

/// Declares records with every derive a binding needs, and nothing else.
macro_rules! records {
    ($(
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty ),* $(,)?
        }
    )*) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
        #[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }
    )*};
}

fn ts(t: chrono::DateTime<chrono::Utc>) -> Timestamp {
    Timestamp(t)
}

fn opt_ts(t: Option<chrono::DateTime<chrono::Utc>>) -> Option<Timestamp> {
    t.map(Timestamp)
}

fn counts(m: std::collections::BTreeMap<String, u64>) -> HashMap<String, i64> {
    m.into_iter().map(|(k, v)| (k, int(v))).collect()
}

mod admin;
mod continuity;
mod layers;
mod procedures;
mod retention;

pub use admin::*;
pub use continuity::*;
pub use layers::*;
pub use procedures::*;
pub use retention::{Eviction, Retention, RetentionStatus};

/// Convert a list of core results.
pub fn list<T, R: From<T>>(items: Vec<T>) -> Vec<R> {
    items.into_iter().map(R::from).collect()
}

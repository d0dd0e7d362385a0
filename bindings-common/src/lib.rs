//! # memstrata-bindings-common
//!
//! What every Memstrata binding shares, so that each binding is glue and
//! nothing else (see `docs/architecture.md`, "The binding layer"):
//!
//! - [`records`]: result records flattened for every language (timestamps as
//!   [`Timestamp`], values as [`JsonValue`], integers that JS takes as numbers);
//! - [`items`]: the items of the batch writes (`record_many`, `store_many`);
//! - [`options`]: option records for calls with trailing optional arguments,
//!   and their conversion to the core's arguments;
//! - [`defaults`]: the defaults and pagination;
//! - [`error`]: [`ErrorCode`], [`BindingError`] and the [`guard`] choke point;
//! - [`handle`]: the closable [`Handle`];
//! - [`callbacks`]: host actions as a [`JsonAction`], progress as [`ProgressEvent`];
//! - [`files`]: export/import to a path, fsynced.
//!
//! No FFI framework is a dependency unless a feature asks for it: `schema`
//! (schemars, for MCP output schemas), `uniffi` (Swift/Kotlin) and `napi` (Node).

#![warn(missing_docs)]

pub mod callbacks;
pub mod defaults;
pub mod error;
pub mod files;
pub mod handle;
pub mod items;
pub mod options;
pub mod records;
pub mod types;
pub mod validity;

pub use callbacks::{JsonAction, ProgressEvent, ProgressStage, actions, progress_sink};
pub use error::{BindingError, ErrorCode, guard, guard_binding};
pub use handle::Handle;
pub use items::{EpisodeItem, KnowledgeItem};
pub use options::{
    OpenOptions, QueryOptions, RecordOptions, SearchOptions, StoreOptions, TaskFilterOptions,
    UpdateOptions, embedding, on_duplicate, retention, vector_query,
};
pub use records::*;
pub use types::embedding_from_f64;
#[cfg(feature = "napi")]
pub use types::embedding_from_js;
pub use types::{Embedding, JsonValue, KeyBytes, Timestamp};
pub use validity::as_of;

#[cfg(feature = "uniffi")]
uniffi::setup_scaffolding!("memstrata_common");

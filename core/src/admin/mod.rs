//! Store-wide administration: status and metrics, optimize, export and import
//! (reached through [`Memory::admin`](crate::Memory::admin)).

pub(crate) mod export;
mod handle;
pub(crate) mod optimize;
pub(crate) mod status;

pub use self::handle::Admin;
pub use crate::admin::export::graph::ENTITY_KEY_PREFIX;
pub use crate::admin::export::{EXPORT_FORMAT_VERSION, ExportStats, ImportStats};
pub use crate::admin::optimize::{OptimizeLevel, OptimizeReport, Progress};
pub use crate::admin::status::{
    ACTIVE_SESSIONS_LIMIT, ActiveSession, DEGRADED_INDEX_LAG, Health, IndexStats, ItemCounts,
    Status, StatusMetrics,
};
pub use crate::engine::metrics::OpMetrics;

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
pub use crate::engine::rekey::RekeyStats;

/// Rotate the encryption key of the sled store at `path` in place, from `old`
/// to `new`: every record (values and sealed keys), the key check and every
/// file of the search index are sealed again under `new`; afterwards `old` is
/// refused as a wrong key. The store must be closed (`StoreLocked` otherwise).
/// Resumable: after a crash the store refuses to open until this runs again
/// with the same keys, which finishes the rotation. `progress` is called with
/// stage `"records"` (records rewritten, of `total` in the store) and
/// `"index"` (index files sealed again). A PostgreSQL store rotates by export
/// and import. See `docs/security.md`, *Rotating a key*.
pub fn rekey_store(
    path: impl AsRef<std::path::Path>,
    old: &crate::EncryptionKey,
    new: &crate::EncryptionKey,
    progress: &dyn Fn(Progress),
) -> crate::Result<RekeyStats> {
    crate::engine::rekey::rekey_store(path.as_ref(), old, new, &|stage, done, total| {
        progress(Progress {
            stage,
            done,
            total,
            message: String::new(),
        })
    })
}

//! [`Shared`]: the engine-wide state every connection of one server process shares.

use std::sync::{Arc, OnceLock};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use memstrata::Memory;

use crate::ops::Change;
use crate::security::audit::AuditLog;
use crate::security::auth::Auth;

/// Engine-wide state shared by every connection of one server process.
#[derive(Debug)]
pub struct Shared {
    /// Root handle on the engine.
    pub mem: Memory,
    /// Configured API keys (HTTP/WebSocket).
    pub auth: Auth,
    /// Audit trail of mutating calls and refused requests.
    pub audit: Option<AuditLog>,
    /// Also audit successful read-only calls.
    pub audit_reads: bool,
    /// Rate limits, call time limit and concurrency bound (off unless configured).
    pub limits: crate::security::limits::Limits,
    pub(super) hub: broadcast::Sender<Change>,
    /// On a PostgreSQL store: the LISTEN/NOTIFY bridge to the other instances.
    bridge: OnceLock<crate::backend::pgnotify::Bridge>,
}

impl Shared {
    /// Shared state over an open engine (a store directory); `audit` appends to
    /// `<store>/audit.jsonl`.
    pub fn new(mem: Memory, auth: Auth, audit: bool) -> std::io::Result<Arc<Shared>> {
        Shared::with_audit(mem, auth, audit, false)
    }

    /// [`Shared::new`]; with `audit_reads`, read-only calls are audited too (`--audit-reads`).
    pub fn with_audit(
        mem: Memory,
        auth: Auth,
        audit: bool,
        audit_reads: bool,
    ) -> std::io::Result<Arc<Shared>> {
        Shared::with_limits(
            mem,
            auth,
            audit,
            audit_reads,
            crate::security::limits::Limits::default(),
        )
    }

    /// [`Shared::with_audit`] with rate limits, a call time limit and a concurrency bound.
    pub fn with_limits(
        mem: Memory,
        auth: Auth,
        audit: bool,
        audit_reads: bool,
        limits: crate::security::limits::Limits,
    ) -> std::io::Result<Arc<Shared>> {
        let audit = if audit {
            Some(AuditLog::open(&mem.path())?)
        } else {
            None
        };
        Ok(Shared::with_audit_log(
            mem,
            auth,
            audit,
            audit_reads,
            limits,
        ))
    }

    /// Shared state with the audit trail given explicitly (`None`: off): what a
    /// PostgreSQL store uses, having no directory (`--audit-file`).
    pub fn with_audit_log(
        mem: Memory,
        auth: Auth,
        audit: Option<AuditLog>,
        audit_reads: bool,
        limits: crate::security::limits::Limits,
    ) -> Arc<Shared> {
        let (hub, _) = broadcast::channel(1024);
        Arc::new(Shared {
            mem,
            auth,
            audit,
            audit_reads,
            limits,
            hub,
            bridge: OnceLock::new(),
        })
    }

    /// Deliver resource changes across instances over one PostgreSQL store: this
    /// instance's changes are NOTIFYed on `url`'s channel and the other instances'
    /// re-published to local subscribers (see `backend::pgnotify`). Runs until
    /// `shutdown`. Returns `false` if a bridge was already started; then nothing is
    /// started (a second bridge would LISTEN under another instance id and re-publish
    /// every notification on this hub a second time).
    pub fn bridge_postgres(
        &self,
        url: &crate::backend::store::PgUrl,
        shutdown: CancellationToken,
    ) -> bool {
        let mut started = false;
        self.bridge.get_or_init(|| {
            started = true;
            crate::backend::pgnotify::Bridge::start(url, self.hub.clone(), shutdown)
        });
        started
    }

    /// The running LISTEN/NOTIFY bridge, if any.
    pub fn bridge(&self) -> Option<&crate::backend::pgnotify::Bridge> {
        self.bridge.get()
    }

    /// Subscribe to every resource change this instance sees (its own and, with a
    /// bridge, the other instances').
    pub fn changes(&self) -> broadcast::Receiver<Change> {
        self.hub.subscribe()
    }

    /// Publish the changes a call made: to this instance's subscribers and, on a
    /// PostgreSQL store, to the other instances.
    pub fn publish(&self, changes: Vec<Change>) {
        let bridge = self.bridge.get();
        for c in changes {
            if let Some(b) = bridge {
                b.send(c.clone());
            }
            // No receivers is fine: nobody is listening.
            let _ = self.hub.send(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second `bridge_postgres` starts nothing: before, it spawned a second bridge
    /// task and then dropped its handle, and that task went on listening (and
    /// re-publishing every other instance's change here) or reconnecting forever.
    #[test]
    fn a_second_bridge_starts_no_task() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let shared =
                Shared::new(Memory::temporary().unwrap(), Auth::disabled(), false).unwrap();
            // Nothing listens on port 1: the bridge task retries until `stop`.
            let url = crate::backend::store::PgUrl::parse("postgres://u@127.0.0.1:1/db?schema=s")
                .unwrap();
            let stop = CancellationToken::new();
            let alive = || {
                tokio::runtime::Handle::current()
                    .metrics()
                    .num_alive_tasks()
            };
            let before = alive();
            assert!(shared.bridge_postgres(&url, stop.clone()));
            assert_eq!(alive(), before + 1, "the bridge task");
            assert!(!shared.bridge_postgres(&url, stop.clone()));
            assert_eq!(alive(), before + 1, "no second bridge task");
            stop.cancel();
        });
    }
}

//! What one connection keeps: who calls ([`Caller`]), its subscriptions, log level
//! and peer, and which resource changes it is told about.

use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;
use rmcp::model::LoggingLevel;
use rmcp::{Peer, RoleServer};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use memstrata::Memory;

use crate::ops::Change;
use crate::protocol::uri::ResourceRef;
use crate::security::auth::{Access, Principal, Target};

/// How a connection identifies its caller.
#[derive(Debug, Clone)]
pub enum Caller {
    /// One principal for the whole connection (stdio, WebSocket, in-process).
    Fixed(Principal),
    /// Authenticated per HTTP request by the HTTP layer.
    PerRequest,
}

#[derive(Debug)]
pub(super) struct Conn {
    pub(super) mem: Memory,
    pub(super) transport: &'static str,
    pub(super) caller: Caller,
    /// Canonical URI -> URI as the client subscribed to it.
    pub(super) subscriptions: Mutex<HashMap<String, String>>,
    /// Principal of the latest request (filters notifications on per-request connections).
    pub(super) last_principal: Mutex<Option<Principal>>,
    pub(super) log_level: Mutex<LoggingLevel>,
    pub(super) peer: OnceLock<Peer<RoleServer>>,
    /// Change receivers opened when a `subscriptions/listen` filter is accepted, i.e. before
    /// the acknowledgment goes out, so no change made after the ack can be missed.
    pub(super) listen_rx: Mutex<std::collections::VecDeque<broadcast::Receiver<Change>>>,
    pub(super) cancel: CancellationToken,
}

impl Conn {
    /// URIs to notify for `change`, and whether to send `list_changed`, for this connection's caller.
    pub(super) fn route(&self, change: &Change) -> (Vec<String>, bool) {
        let who = match &self.caller {
            Caller::Fixed(p) => Some(p.clone()),
            Caller::PerRequest => self.last_principal.lock().clone(),
        };
        let Some(who) = who else {
            return (Vec::new(), false);
        };
        let visible = match &change.context {
            Some(ctx) => who.can_read(ctx),
            None => who.allows(&Target::Global(Access::Read)),
        };
        if !visible {
            return (Vec::new(), false);
        }
        let subs = self.subscriptions.lock();
        let mut updated: Vec<String> = subs.get(&change.uri).cloned().into_iter().collect();
        if let Some(s) = subs.get(&ResourceRef::Status.uri())
            && who.allows(&Target::Global(Access::Read))
        {
            updated.push(s.clone());
        }
        (updated, change.list_changed)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

pub(super) fn level_rank(l: LoggingLevel) -> u8 {
    match l {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

//! Resource changes across server instances over one PostgreSQL store
//! (`LISTEN`/`NOTIFY`).
//!
//! Every instance publishes the changes its own calls make on its local hub (what
//! subscribed connections read). On a PostgreSQL store the [`Bridge`] also sends
//! them with `pg_notify` on the store's channel ([`crate::backend::store::channel`], one per schema),
//! tagged with this instance's id, and `LISTEN`s on the same dedicated connection:
//! changes from other instances are re-published on the local hub, this instance's
//! own are ignored (it already published them). So a client subscribed through
//! instance A hears about a write made through instance B.
//!
//! Payload (JSON, at most [`MAX_PAYLOAD_BYTES`]; a batch of changes is split over
//! several notifications when needed):
//! ```json
//! {"i":"<instance id>","c":[{"u":"memstrata://ctx/knowledge/k","x":"ctx","l":true}]}
//! ```
//! Notifications are hints, like the local hub's: if the connection drops, the
//! bridge reconnects (with backoff); this instance's changes queue meanwhile (at
//! most [`QUEUE`]; beyond that new ones are dropped with a warning) and are sent
//! once it is back, but what other instances sent
//! while it was not listening is not replayed (subscribers re-read the resource
//! anyway when notified). The data itself is in the store, never in a notification.

use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_postgres::{AsyncMessage, NoTls};
use tokio_util::sync::CancellationToken;

use crate::backend::store::PgUrl;
use crate::ops::Change;

/// PostgreSQL refuses notification payloads of 8000 bytes or more.
pub const MAX_PAYLOAD_BYTES: usize = 7900;

/// `application_name` of the bridge's connection, followed by a space and the instance
/// id (visible in `pg_stat_activity`).
pub const APPLICATION_NAME: &str = "memstrata-mcp notify";

/// Changes waiting to be sent (while the connection is down) before new ones are dropped.
pub const QUEUE: usize = 65_536;

/// Changes taken from the queue at once (sent in as few notifications as fit).
const MAX_BATCH: usize = 256;

#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    /// Sending instance.
    i: String,
    /// Changes.
    c: Vec<Wire>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Wire {
    u: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    x: Option<String>,
    #[serde(default)]
    l: bool,
}

/// The running LISTEN/NOTIFY bridge of one instance.
#[derive(Debug)]
pub struct Bridge {
    instance: String,
    channel: String,
    out: mpsc::Sender<Change>,
    listening: watch::Receiver<bool>,
    dropped: std::sync::atomic::AtomicU64,
}

impl Bridge {
    /// Connect to `url`'s database and bridge `hub` (this instance's change hub) with
    /// every other instance on the same schema. Runs until `shutdown`; reconnects on
    /// connection loss.
    pub fn start(
        url: &PgUrl,
        hub: broadcast::Sender<Change>,
        shutdown: CancellationToken,
    ) -> Bridge {
        let instance = uuid::Uuid::now_v7().to_string();
        let channel = crate::backend::store::channel(url);
        let (out, rx) = mpsc::channel(QUEUE);
        let (ready_tx, listening) = watch::channel(false);
        tokio::spawn(run(
            url.connect_str().to_owned(),
            url.masked(),
            channel.clone(),
            instance.clone(),
            hub,
            rx,
            ready_tx,
            shutdown,
        ));
        Bridge {
            instance,
            channel,
            out,
            listening,
            dropped: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// This instance's id (in every notification it sends).
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The channel (one per schema).
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Send a change made by this instance to the others.
    pub fn send(&self, change: Change) {
        match self.out.try_send(change) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                let n = 1 + self
                    .dropped
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n % 1000 == 1 {
                    tracing::warn!(
                        dropped = n,
                        "cross-instance notification queue full ({QUEUE}): other instances' subscribers miss these changes"
                    );
                }
            }
            // The task only ends at shutdown, when nothing is left to tell.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// Wait until the bridge is listening (the first connection made), at most `limit`.
    /// Returns whether it is.
    pub async fn wait_listening(&self, limit: Duration) -> bool {
        let mut rx = self.listening.clone();
        tokio::time::timeout(limit, rx.wait_for(|l| *l))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

/// Encode `changes` from `instance` as notification payloads, each under
/// [`MAX_PAYLOAD_BYTES`]; a single change too large for any payload is dropped with a warning.
fn encode(instance: &str, changes: Vec<Change>) -> Vec<String> {
    let mut out = Vec::new();
    let mut batch: Vec<Wire> = Vec::new();
    let head = serde_json::to_string(&Payload {
        i: instance.to_owned(),
        c: Vec::new(),
    })
    .unwrap_or_default()
    .len();
    let mut size = head;
    for c in changes {
        let w = Wire {
            u: c.uri,
            x: c.context,
            l: c.list_changed,
        };
        let n = serde_json::to_string(&w).map_or(usize::MAX, |s| s.len() + 1);
        if head.saturating_add(n) > MAX_PAYLOAD_BYTES {
            tracing::warn!(
                uri_bytes = w.u.len(),
                "a resource change is too large for a PostgreSQL notification; other instances will not hear of it"
            );
            continue;
        }
        if size + n > MAX_PAYLOAD_BYTES && !batch.is_empty() {
            out.push(payload(instance, std::mem::take(&mut batch)));
            size = head;
        }
        size += n;
        batch.push(w);
    }
    if !batch.is_empty() {
        out.push(payload(instance, batch));
    }
    out
}

fn payload(instance: &str, c: Vec<Wire>) -> String {
    serde_json::to_string(&Payload {
        i: instance.to_owned(),
        c,
    })
    .unwrap_or_default()
}

/// The changes in a notification from another instance (`None` for our own or a
/// payload that is not ours to read).
fn decode(instance: &str, payload: &str) -> Option<Vec<Change>> {
    let p: Payload = match serde_json::from_str(payload) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!("ignoring a notification that is not a Memstrata change: {e}");
            return None;
        }
    };
    if p.i == instance {
        return None;
    }
    Some(
        p.c.into_iter()
            .map(|w| Change {
                uri: w.u,
                context: w.x,
                list_changed: w.l,
            })
            .collect(),
    )
}

/// Whether `url`'s database has the store's schema (the admin commands refuse to
/// create an empty store by accident).
pub async fn schema_exists(url: &PgUrl) -> Result<bool, String> {
    let (client, connection) = tokio_postgres::connect(url.connect_str(), NoTls)
        .await
        .map_err(|e| format!("cannot connect to {url}: {e}"))?;
    let driver = AbortOnDrop(tokio::spawn(async move {
        let _ = connection.await;
    }));
    let row = client
        .query_opt(
            "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1",
            &[&url.schema()],
        )
        .await
        .map_err(|e| format!("cannot query {url}: {e}"))?;
    drop(driver);
    Ok(row.is_some())
}

fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

#[allow(clippy::too_many_arguments)]
async fn run(
    connect: String,
    shown: String,
    channel: String,
    instance: String,
    hub: broadcast::Sender<Change>,
    mut out: mpsc::Receiver<Change>,
    ready: watch::Sender<bool>,
    shutdown: CancellationToken,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        // The `Bridge` (the only sender) is gone: nobody is left to serve.
        if out.is_closed() {
            return;
        }
        let session = tokio::select! {
            () = shutdown.cancelled() => return,
            s = session(&connect, &channel, &instance, &hub, &mut out, &ready, &shutdown) => s,
        };
        match session {
            Ok(()) => return, // shutdown
            Err(e) => {
                let _ = ready.send(false);
                tracing::warn!(
                    store = %shown,
                    "cross-instance notifications interrupted ({e}); reconnecting in {} ms",
                    backoff.as_millis()
                );
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// One connection: LISTEN, then forward both ways until it fails (`Err`) or shutdown (`Ok`).
async fn session(
    connect: &str,
    channel: &str,
    instance: &str,
    hub: &broadcast::Sender<Change>,
    out: &mut mpsc::Receiver<Change>,
    ready: &watch::Sender<bool>,
    shutdown: &CancellationToken,
) -> Result<(), String> {
    let mut config: tokio_postgres::Config = connect
        .parse()
        .map_err(|e| format!("connection URL: {e}"))?;
    config.application_name(format!("{APPLICATION_NAME} {instance}"));
    let (client, mut connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    // Drive the connection; pass notifications on. The sender drops when it closes.
    let (notes_tx, mut notes) = mpsc::unbounded_channel::<String>();
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(m) = messages.next().await {
            match m {
                Ok(AsyncMessage::Notification(n)) => {
                    if notes_tx.send(n.payload().to_owned()).is_err() {
                        break;
                    }
                }
                Ok(AsyncMessage::Notice(n)) => {
                    tracing::debug!("PostgreSQL notice on the notification connection: {n}")
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!("notification connection closed: {e}");
                    break;
                }
            }
        }
    });
    let _abort = AbortOnDrop(driver);
    client
        .batch_execute(&format!("LISTEN {}", quote_ident(channel)))
        .await
        .map_err(|e| format!("LISTEN: {e}"))?;
    let notify = client
        .prepare("SELECT pg_notify($1, $2)")
        .await
        .map_err(|e| format!("prepare: {e}"))?;
    let _ = ready.send(true);
    tracing::info!(channel, instance, "listening for other instances' changes");
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            note = notes.recv() => {
                let Some(payload) = note else {
                    return Err("the connection closed".into());
                };
                for c in decode(instance, &payload).into_iter().flatten() {
                    // No local subscriber is fine.
                    let _ = hub.send(c);
                }
            }
            first = out.recv() => {
                let Some(first) = first else { return Ok(()) };
                let mut changes = vec![first];
                while changes.len() < MAX_BATCH {
                    match out.try_recv() {
                        Ok(c) => changes.push(c),
                        Err(_) => break,
                    }
                }
                let n = changes.len();
                for p in encode(instance, changes) {
                    client
                        .execute(&notify, &[&channel, &p])
                        .await
                        .map_err(|e| format!("NOTIFY ({n} changes not all sent to other instances): {e}"))?;
                }
            }
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(uri: &str, ctx: Option<&str>, list: bool) -> Change {
        Change {
            uri: uri.to_owned(),
            context: ctx.map(str::to_owned),
            list_changed: list,
        }
    }

    #[test]
    fn payloads_round_trip_and_skip_our_own() {
        let cs = vec![
            change("memstrata://a/knowledge/k", Some("a"), true),
            change("memstrata://sessions", None, false),
        ];
        let p = encode("me", cs.clone());
        assert_eq!(p.len(), 1);
        assert_eq!(decode("other", &p[0]).unwrap(), cs);
        assert!(decode("me", &p[0]).is_none());
        assert!(decode("other", "not json").is_none());
    }

    #[test]
    fn large_batches_split_under_the_limit() {
        let cs: Vec<Change> = (0..500)
            .map(|i| {
                change(
                    &format!("memstrata://ctx/episodes/{i:0>40}"),
                    Some("ctx"),
                    true,
                )
            })
            .collect();
        let p = encode("me", cs.clone());
        assert!(p.len() > 1);
        assert!(p.iter().all(|s| s.len() <= MAX_PAYLOAD_BYTES));
        let back: Vec<Change> = p.iter().flat_map(|s| decode("x", s).unwrap()).collect();
        assert_eq!(back, cs);
        // One change larger than any payload is dropped, not sent truncated.
        let huge = change(
            &format!("memstrata://ctx/k/{}", "z".repeat(9000)),
            None,
            false,
        );
        assert!(encode("me", vec![huge]).is_empty());
    }

    #[test]
    fn channel_names_are_quoted() {
        assert_eq!(
            quote_ident("memstrata_changes:a\"b"),
            "\"memstrata_changes:a\"\"b\""
        );
    }
}

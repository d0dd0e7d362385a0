//! [`DrainOnEof`]: a transport wrapper that keeps a session serving after its input ends
//! until every request received before the end has been answered.
//!
//! rmcp's service loop stops reading from its own outbound queue (server-to-client
//! notifications and requests) as soon as the transport's `receive` returns `None`. It
//! then only collects handler *responses*, for 5 seconds. A handler that still has to
//! send a notification before it can answer (a `notifications/message` log line for a
//! failed tool, progress reports, ...) waits for a delivery that never happens, so its
//! response is lost and the loop gives up with "timed out draining in-flight responses".
//! One-shot clients that close stdin right after their last request hit exactly that.
//!
//! This wrapper reports the end of input to rmcp only once no request is left in
//! flight, so the loop keeps running (and delivering notifications) while the last
//! handlers finish. A request that is still running after `grace` no longer holds the
//! session open.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, ClientRequest, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::watch;
use tokio::time::Instant;

/// How long [`DrainOnEof`] waits, after the input ends, for requests still in flight.
pub const DEFAULT_EOF_GRACE: Duration = Duration::from_secs(30);

/// Wraps a server transport so that the end of its input reaches rmcp only after every
/// request received before it has been answered (responses and errors alike), or after
/// `grace` at most.
///
/// `subscriptions/listen` requests are not waited for: they last as long as the client wants.
#[derive(Debug)]
pub struct DrainOnEof<T> {
    inner: T,
    /// Ids of the requests received and not yet answered.
    pending: Arc<watch::Sender<HashSet<RequestId>>>,
    grace: Duration,
    /// Set when the inner transport's input ended: when to stop waiting.
    deadline: Option<Instant>,
}

impl<T: Transport<RoleServer>> DrainOnEof<T> {
    /// `inner`, waiting up to [`DEFAULT_EOF_GRACE`] for in-flight requests at end of input.
    pub fn new(inner: T) -> Self {
        DrainOnEof {
            inner,
            pending: Arc::new(watch::Sender::new(HashSet::new())),
            grace: DEFAULT_EOF_GRACE,
            deadline: None,
        }
    }

    /// Wait up to `grace` (instead of [`DEFAULT_EOF_GRACE`]) for in-flight requests.
    #[cfg(test)]
    #[must_use]
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Requests received and not answered yet.
    pub fn in_flight(&self) -> usize {
        self.pending.borrow().len()
    }

    fn track(&self, m: &RxJsonRpcMessage<RoleServer>) {
        match m {
            JsonRpcMessage::Request(r)
                if !matches!(r.request, ClientRequest::SubscriptionsListenRequest(_)) =>
            {
                let id = r.id.clone();
                self.pending.send_modify(|p| {
                    p.insert(id);
                });
            }
            // rmcp drops the response of a cancelled request: do not wait for it.
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    self.pending.send_if_modified(|p| p.remove(id));
                }
            }
            _ => {}
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for DrainOnEof<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        let send = self.inner.send(item);
        let pending = self.pending.clone();
        async move {
            let r = send.await;
            // Written and flushed (or failed for good): either way nothing more to wait for.
            if let Some(id) = answered {
                pending.send_if_modified(|p| p.remove(&id));
            }
            r
        }
    }

    // Cancel-safe as long as the inner `receive` is: rmcp polls it in a `select!`.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let deadline = match self.deadline {
            Some(d) => d,
            None => match self.inner.receive().await {
                Some(m) => {
                    self.track(&m);
                    return Some(m);
                }
                None => {
                    let n = self.in_flight();
                    if n > 0 {
                        tracing::debug!(
                            in_flight = n,
                            "input ended; answering the requests in flight"
                        );
                    }
                    *self.deadline.insert(Instant::now() + self.grace)
                }
            },
        };
        let mut rx = self.pending.subscribe();
        if tokio::time::timeout_at(deadline, rx.wait_for(HashSet::is_empty))
            .await
            .is_err()
        {
            let ids: Vec<String> = self
                .pending
                .borrow()
                .iter()
                .map(ToString::to_string)
                .collect();
            tracing::warn!(
                "input ended {:?} ago and request(s) {} are still running; closing the session without their answers",
                self.grace,
                ids.join(", ")
            );
        }
        None
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ErrorData, JsonRpcRequest, PingRequest};
    use std::collections::VecDeque;
    use std::convert::Infallible;

    /// Yields its messages, then the end of input.
    struct Scripted(VecDeque<RxJsonRpcMessage<RoleServer>>);

    impl Transport<RoleServer> for Scripted {
        type Error = Infallible;
        fn send(
            &mut self,
            _item: TxJsonRpcMessage<RoleServer>,
        ) -> impl Future<Output = Result<(), Infallible>> + Send + 'static {
            std::future::ready(Ok(()))
        }
        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
            self.0.pop_front()
        }
        async fn close(&mut self) -> Result<(), Infallible> {
            Ok(())
        }
    }

    fn ping(id: i64) -> RxJsonRpcMessage<RoleServer> {
        JsonRpcMessage::Request(JsonRpcRequest::new(
            RequestId::Number(id),
            ClientRequest::PingRequest(PingRequest::default()),
        ))
    }

    #[tokio::test]
    async fn end_of_input_waits_for_the_answers() {
        let mut t = DrainOnEof::new(Scripted(VecDeque::from([ping(1), ping(2)])));
        assert!(t.receive().await.is_some());
        assert!(t.receive().await.is_some());
        assert_eq!(t.in_flight(), 2);
        let answer1 = t.send(JsonRpcMessage::error(
            ErrorData::internal_error("x", None),
            Some(RequestId::Number(1)),
        ));
        let answer2 = t.send(JsonRpcMessage::error(
            ErrorData::internal_error("y", None),
            Some(RequestId::Number(2)),
        ));
        // The end of input is reported only once both answers went out.
        {
            let mut eof = std::pin::pin!(t.receive());
            assert!(futures::poll!(&mut eof).is_pending());
            answer1.await.unwrap();
            assert!(futures::poll!(&mut eof).is_pending());
            answer2.await.unwrap();
            assert!(eof.await.is_none());
        }
        assert_eq!(t.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_request_that_never_ends_does_not_hold_the_session() {
        let mut t = DrainOnEof::new(Scripted(VecDeque::from([ping(7)])))
            .with_grace(Duration::from_millis(20));
        assert!(t.receive().await.is_some());
        assert!(t.receive().await.is_none());
        assert_eq!(t.in_flight(), 1);
        // Still the end of input when asked again.
        assert!(t.receive().await.is_none());
    }
}

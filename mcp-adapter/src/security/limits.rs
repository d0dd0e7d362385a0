//! Rate limits, a per-call time limit and bounded concurrency for a shared server.
//!
//! Everything here is off by default ([`LimitsConfig::default`]); `memstrata-mcp http`
//! turns parts on with `--rate-limit`, `--rate-burst`, `--call-timeout-ms` and
//! `--max-concurrent-calls`.
//!
//! - **Rate limit**: one token bucket per principal (the API key id, or the JWT
//!   principal), refilled at `rate` calls per second and holding at most `burst`
//!   tokens ([`governor`], GCRA). Over HTTP every request takes a token and a refusal is
//!   `429 Too Many Requests` with `Retry-After`; over WebSocket every JSON-RPC request
//!   takes a token and a refusal is a JSON-RPC error `LIMIT_EXCEEDED` with
//!   `data.retry_after_ms`.
//! - **Call time limit**: a tool call that has not finished within `call_timeout`
//!   answers `LIMIT_EXCEEDED`. The engine work itself runs on a blocking thread and is
//!   not interrupted: a write that was already under way may still complete.
//! - **Concurrency**: at most `max_concurrent_calls` tool calls run at once; as many
//!   again may wait; past that a call is refused at once (`LIMIT_EXCEEDED`, "server
//!   busy"). Each WebSocket connection also stops reading once
//!   [`MAX_IN_FLIGHT_PER_CONNECTION`] execute envelopes of its own are running, so a
//!   flood is held back by TCP instead of queueing in memory.

use std::future::Future;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use memstrata_bindings_common::{BindingError, ErrorCode};
use tokio::sync::Semaphore;

use crate::error::{ToolError, ToolResult};

/// Execute envelopes one WebSocket connection may have running before it stops reading.
pub const MAX_IN_FLIGHT_PER_CONNECTION: usize = 64;

/// What to limit; `None` everywhere (the default) means no limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitsConfig {
    /// Calls per second per principal.
    pub rate: Option<NonZeroU32>,
    /// Bucket size (burst) per principal; defaults to `rate`.
    pub burst: Option<NonZeroU32>,
    /// Time limit of one tool call.
    pub call_timeout: Option<Duration>,
    /// Tool calls running at once (as many again may wait).
    pub max_concurrent_calls: Option<usize>,
}

/// The command-line flags of `memstrata-mcp http` for [`LimitsConfig`].
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LimitArgs {
    /// Calls per second allowed per API key / principal (token bucket); off when absent.
    #[arg(long, value_name = "PER_SECOND")]
    pub rate_limit: Option<NonZeroU32>,
    /// Burst size of the per-principal token bucket (default: the --rate-limit value).
    #[arg(long, value_name = "CALLS", requires = "rate_limit")]
    pub rate_burst: Option<NonZeroU32>,
    /// Time limit of one tool call in milliseconds; off when absent.
    #[arg(long, value_name = "MS")]
    pub call_timeout_ms: Option<NonZeroU32>,
    /// Tool calls running at once (as many again may wait, more are refused); off when absent.
    #[arg(long, value_name = "N")]
    pub max_concurrent_calls: Option<std::num::NonZeroUsize>,
}

impl LimitArgs {
    /// As a [`LimitsConfig`].
    pub fn config(&self) -> LimitsConfig {
        LimitsConfig {
            rate: self.rate_limit,
            burst: self.rate_burst,
            call_timeout: self
                .call_timeout_ms
                .map(|ms| Duration::from_millis(u64::from(ms.get()))),
            max_concurrent_calls: self.max_concurrent_calls.map(std::num::NonZeroUsize::get),
        }
    }
}

/// The limits in force for one server process.
pub struct Limits {
    cfg: LimitsConfig,
    rate: Option<DefaultKeyedRateLimiter<String>>,
    clock: DefaultClock,
    calls: Option<Arc<Semaphore>>,
    waiting: AtomicUsize,
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limits").field("cfg", &self.cfg).finish()
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::new(LimitsConfig::default())
    }
}

/// A `LIMIT_EXCEEDED` tool error.
pub fn limit_error(message: impl Into<String>) -> ToolError {
    BindingError::new(ErrorCode::LimitExceeded, message).into()
}

impl Limits {
    /// Limits from `cfg`.
    pub fn new(cfg: LimitsConfig) -> Self {
        let rate = cfg.rate.map(|r| {
            let quota = Quota::per_second(r).allow_burst(cfg.burst.unwrap_or(r));
            RateLimiter::keyed(quota)
        });
        let calls = cfg
            .max_concurrent_calls
            .filter(|n| *n > 0)
            .map(|n| Arc::new(Semaphore::new(n)));
        Limits {
            cfg,
            rate,
            clock: DefaultClock::default(),
            calls,
            waiting: AtomicUsize::new(0),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LimitsConfig {
        &self.cfg
    }

    /// Take one token from `principal`'s bucket; `Err(wait)` when it is empty.
    pub fn check_rate(&self, principal: &str) -> Result<(), Duration> {
        let Some(rl) = &self.rate else {
            return Ok(());
        };
        match rl.check_key(&principal.to_owned()) {
            Ok(()) => Ok(()),
            Err(not_until) => Err(not_until.wait_time_from(self.clock.now())),
        }
    }

    /// The error answered to a rate-limited call.
    pub fn rate_error(principal: &str, wait: Duration) -> ToolError {
        limit_error(format!(
            "rate limit exceeded for {principal:?}; retry in {} ms",
            wait.as_millis().max(1)
        ))
    }

    /// Run one tool call under the concurrency bound and the time limit.
    pub async fn run<T, F>(&self, tool: &str, call: F) -> ToolResult<T>
    where
        F: Future<Output = ToolResult<T>>,
    {
        let limited = async {
            let _permit = match &self.calls {
                None => None,
                Some(sem) => {
                    let max = self.cfg.max_concurrent_calls.unwrap_or(0);
                    match Arc::clone(sem).try_acquire_owned() {
                        Ok(p) => Some(p),
                        Err(_) => {
                            if self.waiting.fetch_add(1, Ordering::SeqCst) >= max {
                                self.waiting.fetch_sub(1, Ordering::SeqCst);
                                return Err(limit_error(format!(
                                    "server busy: {max} tool calls running and {max} waiting; retry later"
                                )));
                            }
                            let p = Arc::clone(sem).acquire_owned().await;
                            self.waiting.fetch_sub(1, Ordering::SeqCst);
                            p.ok()
                        }
                    }
                }
            };
            call.await
        };
        match self.cfg.call_timeout {
            None => limited.await,
            Some(t) => match tokio::time::timeout(t, limited).await {
                Ok(r) => r,
                Err(_) => {
                    tracing::warn!(tool, limit_ms = t.as_millis() as u64, "tool call timed out");
                    Err(limit_error(format!(
                        "{tool}: call time limit of {} ms exceeded (the server's --call-timeout-ms)",
                        t.as_millis()
                    )))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_per_principal() {
        let l = Limits::new(LimitsConfig {
            rate: NonZeroU32::new(1),
            burst: NonZeroU32::new(3),
            ..LimitsConfig::default()
        });
        for _ in 0..3 {
            assert!(l.check_rate("a").is_ok());
        }
        let wait = l.check_rate("a").unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert!(l.check_rate("b").is_ok());
        assert!(Limits::default().check_rate("a").is_ok());
    }

    #[tokio::test]
    async fn timeout_and_busy() {
        let l = Limits::new(LimitsConfig {
            call_timeout: Some(Duration::from_millis(10)),
            max_concurrent_calls: Some(1),
            ..LimitsConfig::default()
        });
        let slow = l
            .run("t", async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(())
            })
            .await
            .unwrap_err();
        assert_eq!(slow.code(), "LIMIT_EXCEEDED");
        assert!(slow.message().contains("time limit"), "{}", slow.message());
        assert_eq!(l.run("t", async { Ok(1) }).await.unwrap(), 1);
    }
}

//! Injectable time source, so TTL and duration tests never sleep.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, TimeZone, Utc};

/// A source of "now". The engine reads time only through this trait.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Current time in UTC.
    fn now(&self) -> DateTime<Utc>;
}

/// The real wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug)]
pub struct ManualClock {
    millis: AtomicI64,
}

impl ManualClock {
    /// A clock frozen at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            millis: AtomicI64::new(start.timestamp_millis()),
        }
    }

    /// A clock frozen at the current wall-clock time.
    pub fn starting_now() -> Self {
        Self::new(Utc::now())
    }

    /// Move the clock forward (or backward, with a negative duration).
    pub fn advance(&self, by: std::time::Duration) {
        self.millis
            .fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }

    /// Set the clock to an absolute time.
    pub fn set(&self, to: DateTime<Utc>) {
        self.millis.store(to.timestamp_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        millis_to_dt(self.millis.load(Ordering::SeqCst))
    }
}

/// Milliseconds since the Unix epoch to a UTC timestamp (saturating at the representable range).
pub(crate) fn millis_to_dt(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

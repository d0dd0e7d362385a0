//! `memstrata.ManualClock`: the core's injectable test clock, so TTL and duration
//! tests never sleep.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use pyo3::prelude::*;

use crate::convert;

/// A clock that only moves when told to. Pass it as `Memory(clock=...)`.
#[pyclass(frozen, module = "memstrata")]
#[derive(Debug)]
pub struct ManualClock {
    inner: Arc<memstrata::ManualClock>,
}

impl ManualClock {
    pub(crate) fn core(&self) -> Arc<dyn memstrata::Clock> {
        self.inner.clone()
    }
}

#[pymethods]
impl ManualClock {
    /// A clock frozen at `start` (an aware datetime), or at the current time.
    #[new]
    #[pyo3(signature = (start=None))]
    fn py_new(start: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let inner = match convert::opt_timestamp(start, "start")? {
            Some(t) => memstrata::ManualClock::new(t.0),
            None => memstrata::ManualClock::starting_now(),
        };
        Ok(ManualClock {
            inner: Arc::new(inner),
        })
    }

    /// Move the clock forward by `seconds` (int / float seconds or a timedelta, > 0).
    fn advance(&self, seconds: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Some(d) = convert::ttl(Some(seconds))? {
            self.inner.advance(d);
        }
        Ok(())
    }

    /// Set the clock to an absolute (aware) datetime.
    fn set(&self, to: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inner.set(convert::datetime(to, "to")?);
        Ok(())
    }

    /// The clock's current time (aware UTC datetime).
    fn now(&self) -> DateTime<Utc> {
        use memstrata::Clock as _;
        self.inner.now()
    }

    fn __repr__(&self) -> String {
        use memstrata::Clock as _;
        format!("ManualClock({})", self.inner.now().to_rfc3339())
    }
}

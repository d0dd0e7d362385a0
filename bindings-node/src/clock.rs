//! `ManualClock`: the core's injectable clock, so TTL and duration tests never sleep.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use memstrata::Clock as _;
use memstrata_bindings_common::options;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::error;

/// A clock that only moves when told to: `Memory.open(path, { clock })`.
#[napi]
#[derive(Debug)]
pub struct ManualClock {
    inner: Arc<memstrata::ManualClock>,
}

impl ManualClock {
    pub(crate) fn core(&self) -> Arc<dyn memstrata::Clock> {
        self.inner.clone()
    }
}

#[napi]
impl ManualClock {
    /// A clock at `start` (default: now).
    #[napi(constructor)]
    pub fn new(start: Option<DateTime<Utc>>) -> Self {
        let inner = match start {
            Some(t) => memstrata::ManualClock::new(t),
            None => memstrata::ManualClock::starting_now(),
        };
        ManualClock {
            inner: Arc::new(inner),
        }
    }

    /// Move forward by `seconds` (> 0).
    #[napi]
    pub fn advance(&self, env: &Env, seconds: f64) -> Result<()> {
        match options::ttl(Some(seconds)) {
            Ok(Some(d)) => {
                self.inner.advance(d);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => Err(error::to_napi(env, e)),
        }
    }

    /// Jump to `to`.
    #[napi]
    pub fn set(&self, to: DateTime<Utc>) {
        self.inner.set(to);
    }

    /// The clock's current time.
    #[napi]
    pub fn now(&self) -> DateTime<Utc> {
        self.inner.now()
    }
}

//! Per-operation counters and latency histograms (hdrhistogram), reported by `status`.

use std::collections::BTreeMap;
use std::time::Instant;

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde::Serialize;

/// Latency summary of one operation, in microseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OpMetrics {
    /// Calls recorded (successful and failed).
    pub count: u64,
    /// Failed calls.
    pub errors: u64,
    /// Median latency (µs).
    pub p50_us: u64,
    /// 95th percentile latency (µs).
    pub p95_us: u64,
    /// 99th percentile latency (µs).
    pub p99_us: u64,
    /// Slowest call (µs).
    pub max_us: u64,
}

#[derive(Debug)]
struct Entry {
    hist: Histogram<u64>,
    errors: u64,
}

/// Thread-safe registry of operation histograms.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    ops: Mutex<BTreeMap<&'static str, Entry>>,
}

impl Metrics {
    pub(crate) fn record(&self, op: &'static str, started: Instant, ok: bool) {
        let us = started.elapsed().as_micros().min(u64::MAX as u128) as u64;
        let mut ops = self.ops.lock();
        let e = ops.entry(op).or_insert_with(|| Entry {
            // 1 µs .. 1 hour, 3 significant digits; auto-resize past that.
            hist: {
                let mut h = Histogram::new_with_bounds(1, 3_600_000_000, 3)
                    .expect("valid histogram bounds");
                h.auto(true);
                h
            },
            errors: 0,
        });
        let _ = e.hist.record(us.max(1));
        if !ok {
            e.errors += 1;
        }
    }

    pub(crate) fn snapshot(&self) -> BTreeMap<String, OpMetrics> {
        self.ops
            .lock()
            .iter()
            .map(|(k, e)| {
                (
                    (*k).to_owned(),
                    OpMetrics {
                        count: e.hist.len(),
                        errors: e.errors,
                        p50_us: e.hist.value_at_quantile(0.50),
                        p95_us: e.hist.value_at_quantile(0.95),
                        p99_us: e.hist.value_at_quantile(0.99),
                        max_us: e.hist.max(),
                    },
                )
            })
            .collect()
    }
}

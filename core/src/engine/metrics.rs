//! Per-operation counters and latency histograms (hdrhistogram), reported by `status`.
//!
//! Every operation name passed to `Engine::timed` is a `&'static str` from a
//! fixed set ([`OPS`]); each has its own slot and lock, so calls of different
//! operations never contend and no call takes a process-wide lock. A name
//! missing from [`OPS`] still works, through a shared fallback map (a unit
//! test keeps [`OPS`] in step with the sources).

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

/// Every operation name recorded, sorted (binary-searched on each call).
const OPS: &[&str] = &[
    "context.retrieve",
    "context.store",
    "context.switch",
    "episodic.forget",
    "episodic.get",
    "episodic.recent",
    "episodic.record",
    "episodic.search",
    "episodic.summarize",
    "export",
    "import",
    "import_knowledge_graph",
    "optimize",
    "procedural.execute",
    "procedural.forget",
    "procedural.get",
    "procedural.learn",
    "procedural.list",
    "procedural.resume",
    "procedural.run",
    "procedural.update",
    "semantic.forget",
    "semantic.history",
    "semantic.keys",
    "semantic.query",
    "semantic.retrieve",
    "semantic.store",
    "semantic.update",
    "session.create",
    "session.delete",
    "session.list",
    "session.restore",
    "session.save",
    "session.versions",
    "short_term.forget",
    "short_term.keys",
    "short_term.retrieve",
    "short_term.store",
    "status",
    "timesheet.punch_in",
    "timesheet.punch_out",
    "timesheet.report",
    "timesheet.task",
    "timesheet.tasks",
    "working.add_to_workspace",
    "working.clear",
    "working.current_focus",
    "working.focus",
    "working.workspace",
];

/// Index of `op` in [`OPS`] (a binary search over short static strings).
fn slot_of(op: &str) -> Option<usize> {
    OPS.binary_search(&op).ok()
}

#[derive(Debug)]
struct Entry {
    hist: Histogram<u64>,
    errors: u64,
}

impl Entry {
    fn new() -> Self {
        // 1 µs .. 1 hour, 3 significant digits; auto-resize past that.
        let mut hist =
            Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds");
        hist.auto(true);
        Entry { hist, errors: 0 }
    }

    fn record(&mut self, us: u64, ok: bool) {
        let _ = self.hist.record(us.max(1));
        if !ok {
            self.errors += 1;
        }
    }

    fn summary(&self) -> OpMetrics {
        OpMetrics {
            count: self.hist.len(),
            errors: self.errors,
            p50_us: self.hist.value_at_quantile(0.50),
            p95_us: self.hist.value_at_quantile(0.95),
            p99_us: self.hist.value_at_quantile(0.99),
            max_us: self.hist.max(),
        }
    }
}

/// One operation's entry, on its own cache line; the histogram is allocated on first use.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Slot(Mutex<Option<Box<Entry>>>);

/// Thread-safe registry of operation histograms.
#[derive(Debug)]
pub(crate) struct Metrics {
    slots: Box<[Slot]>,
    /// Names not in [`OPS`].
    other: Mutex<BTreeMap<&'static str, Entry>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            slots: OPS.iter().map(|_| Slot::default()).collect(),
            other: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Metrics {
    pub(crate) fn record(&self, op: &'static str, started: Instant, ok: bool) {
        let us = started.elapsed().as_micros().min(u64::MAX as u128) as u64;
        match slot_of(op) {
            Some(i) => self.slots[i]
                .0
                .lock()
                .get_or_insert_with(|| Box::new(Entry::new()))
                .record(us, ok),
            None => self
                .other
                .lock()
                .entry(op)
                .or_insert_with(Entry::new)
                .record(us, ok),
        }
    }

    pub(crate) fn snapshot(&self) -> BTreeMap<String, OpMetrics> {
        let mut out: BTreeMap<String, OpMetrics> = self
            .other
            .lock()
            .iter()
            .map(|(k, e)| ((*k).to_owned(), e.summary()))
            .collect();
        for (name, slot) in OPS.iter().zip(self.slots.iter()) {
            if let Some(e) = slot.0.lock().as_deref() {
                out.insert((*name).to_owned(), e.summary());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_sorted_and_unique() {
        assert!(OPS.windows(2).all(|w| w[0] < w[1]));
    }

    /// Every `timed("…")` name in the sources has its own slot.
    #[test]
    fn ops_cover_every_timed_call() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut missing = Vec::new();
        for f in std::fs::read_dir(&dir).expect("src dir") {
            let p = f.expect("entry").path();
            if p.extension().is_none_or(|x| x != "rs") || p.ends_with("metrics.rs") {
                continue;
            }
            let src = std::fs::read_to_string(&p).expect("read source");
            for part in src.split("timed(").skip(1) {
                let rest = part.trim_start();
                let Some(rest) = rest.strip_prefix('"') else {
                    continue;
                };
                let name = &rest[..rest.find('"').expect("closing quote")];
                if OPS.binary_search(&name).is_err() {
                    missing.push(format!("{}: {name}", p.display()));
                }
            }
        }
        assert!(missing.is_empty(), "add to metrics::OPS: {missing:?}");
    }

    #[test]
    fn snapshot_reports_known_and_other_ops() {
        let m = Metrics::default();
        let t = Instant::now();
        m.record("short_term.retrieve", t, true);
        m.record("short_term.retrieve", t, false);
        m.record("not.listed", t, true);
        let s = m.snapshot();
        assert_eq!(s.len(), 2);
        assert_eq!(s["short_term.retrieve"].count, 2);
        assert_eq!(s["short_term.retrieve"].errors, 1);
        assert_eq!(s["not.listed"].count, 1);
        assert!(!s.contains_key("short_term.store"));
    }
}

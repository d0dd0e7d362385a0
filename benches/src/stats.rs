//! Latency summaries.

use std::time::Duration;

use hdrhistogram::Histogram;

/// A latency histogram in nanoseconds (1 ns .. 100 s, 3 significant digits).
#[derive(Debug, Clone)]
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

impl Latency {
    /// Empty.
    pub fn new() -> Latency {
        let mut hist = Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid bounds");
        hist.auto(true);
        Latency { hist }
    }
    /// Record one sample.
    pub fn record(&mut self, d: Duration) {
        let _ = self.hist.record((d.as_nanos() as u64).max(1));
    }
    /// Record a value in nanoseconds.
    pub fn record_ns(&mut self, ns: u64) {
        let _ = self.hist.record(ns.max(1));
    }
    /// Samples.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }
    /// No samples?
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }
    /// Quantile in nanoseconds.
    pub fn q(&self, q: f64) -> u64 {
        self.hist.value_at_quantile(q)
    }
    /// Median in nanoseconds.
    pub fn p50(&self) -> u64 {
        self.q(0.5)
    }
    /// Share of the summed time spent in samples above `ns` (0..=1).
    pub fn share_above(&self, ns: u64) -> f64 {
        let mut total = 0.0;
        let mut above = 0.0;
        for v in self.hist.iter_recorded() {
            let t = v.value_iterated_to() as f64 * v.count_at_value() as f64;
            total += t;
            if v.value_iterated_to() > ns {
                above += t;
            }
        }
        if total > 0.0 { above / total } else { 0.0 }
    }
    /// Add another histogram's samples.
    pub fn add(&mut self, other: &Latency) {
        let _ = self.hist.add(&other.hist);
    }
    /// Largest sample in nanoseconds.
    pub fn max(&self) -> u64 {
        self.hist.max()
    }
    /// Mean in nanoseconds.
    pub fn mean(&self) -> f64 {
        self.hist.mean()
    }
}

/// Median of a slice (sorted copy).
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One Markdown row `| name | base p50 | other p50 | ratio p50 | base p95 | other p95 | ratio p95 |`
/// comparing two latency histograms of the same operation (ratio = other / base).
pub fn ratio_row(name: &str, base: &Latency, other: &Latency) -> String {
    let (b50, o50) = (base.p50() as f64, other.p50() as f64);
    let (b95, o95) = (base.q(0.95) as f64, other.q(0.95) as f64);
    format!(
        "| {name} | {} | {} | {:.2}× | {} | {} | {:.2}× |",
        fmt_ns(b50),
        fmt_ns(o50),
        o50 / b50,
        fmt_ns(b95),
        fmt_ns(o95),
        o95 / b95
    )
}

/// Human duration from nanoseconds: `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s`.
pub fn fmt_ns(ns: f64) -> String {
    if !ns.is_finite() {
        "–".into()
    } else if ns < 1_000.0 {
        format!("{ns:.0} ns")
    } else if ns < 1_000_000.0 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1_000_000_000.0 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// Human byte count: `512 B`, `1.5 KiB`, `12.3 MiB`, `1.20 GiB`.
pub fn fmt_bytes(b: f64) -> String {
    if b < 1024.0 {
        format!("{b:.0} B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / 1024.0 / 1024.0)
    } else {
        format!("{:.2} GiB", b / 1024.0 / 1024.0 / 1024.0)
    }
}

/// Rate with a thousands separator-free short form: `12.3k/s`.
pub fn fmt_rate(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.2}M/s", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1}k/s", per_s / 1e3)
    } else {
        format!("{per_s:.0}/s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_formats() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(fmt_ns(850.0), "850 ns");
        assert_eq!(fmt_ns(12_300.0), "12.3 µs");
        assert_eq!(fmt_bytes(1536.0), "1.5 KiB");
        let mut l = Latency::new();
        for i in 1..=100u64 {
            l.record_ns(i * 1000);
        }
        assert!((49_000..=51_000).contains(&l.p50()));
    }
}

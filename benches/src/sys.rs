//! The machine: hardware description, resident memory, disk usage.

use std::path::Path;

/// What the figures were measured on.
#[derive(Debug, Clone)]
pub struct Hardware {
    /// `/proc/cpuinfo` model name.
    pub cpu: String,
    /// Logical CPUs.
    pub cores: usize,
    /// `MemTotal` in bytes.
    pub ram_bytes: u64,
    /// `uname -sr`-like kernel string.
    pub kernel: String,
    /// rustc that built this binary (from the build environment, if known).
    pub rustc: String,
}

impl Hardware {
    /// Read `/proc`.
    pub fn detect() -> Hardware {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_else(|| "unknown CPU".into());
        let cores = cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count()
            .max(
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1),
            );
        let ram_bytes = proc_kb("/proc/meminfo", "MemTotal:").unwrap_or(0) * 1024;
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| format!("Linux {}", s.trim()))
            .unwrap_or_else(|_| std::env::consts::OS.to_owned());
        let rustc = option_env!("BENCH_RUSTC_VERSION").unwrap_or("").to_owned();
        Hardware {
            cpu,
            cores,
            ram_bytes,
            kernel,
            rustc,
        }
    }
}

/// A `Key:   123 kB` line of a `/proc` file, in kB.
pub fn proc_kb(file: &str, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(file).ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// Resident set size of this process (`VmRSS`), in bytes.
pub fn rss_bytes() -> u64 {
    proc_kb("/proc/self/status", "VmRSS:").unwrap_or(0) * 1024
}

/// Peak resident set size of this process (`VmHWM`), in bytes.
pub fn peak_rss_bytes() -> u64 {
    proc_kb("/proc/self/status", "VmHWM:").unwrap_or(0) * 1024
}

/// Disk usage of a file or directory tree: (apparent bytes, allocated bytes).
pub fn disk_usage(path: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut apparent = 0;
    let mut allocated = 0;
    let mut stack = vec![path.to_owned()];
    while let Some(p) = stack.pop() {
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if md.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else {
            apparent += md.len();
            allocated += md.blocks() * 512;
        }
    }
    (apparent, allocated)
}

/// `/proc/loadavg`'s first three fields, or "?".
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "?".into())
}

/// The environment variable `name` as a number, or `default` when it is unset or not a number.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

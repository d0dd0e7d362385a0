//! Progress ticks, the phase being measured, and the watchdog that ends a stalled run.

use std::path::Path;
use std::time::{Duration, Instant};

/// Progress counter watched by [`watchdog`].
static PROGRESS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static PHASE: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

pub(crate) fn tick() {
    PROGRESS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

pub(crate) fn phase(p: String) {
    eprintln!("   {p}");
    *PHASE.lock().unwrap_or_else(|e| e.into_inner()) = p;
    tick();
}

/// Exit with status 75 when nothing progresses for `BENCH_STALL_SECS`
/// (default 180 s). Unpatched sled 0.34.7 could deadlock under sustained
/// writes (its segment accountant waited, under its mutex, for a file
/// truncation queued on its own starved I/O pool; fixed in `vendor/sled`);
/// the watchdog stays so that any stall is reported, and `scripts/bench.sh`
/// retries the run and says so in the report rather than hanging for ever.
pub(crate) fn watchdog() {
    let stall = std::env::var("BENCH_STALL_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(180u64);
    std::thread::spawn(move || {
        let mut last = PROGRESS.load(std::sync::atomic::Ordering::Relaxed);
        let mut since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_secs(5));
            let now = PROGRESS.load(std::sync::atomic::Ordering::Relaxed);
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= Duration::from_secs(stall) {
                let p = PHASE.lock().map(|p| p.clone()).unwrap_or_default();
                eprintln!(
                    "STALLED: no progress for {stall} s during \"{p}\" (pid {})",
                    std::process::id()
                );
                if let Ok(dir) = std::env::var("BENCH_STALL_DUMP") {
                    let _ = std::process::Command::new("gdb")
                        .args([
                            "-p",
                            &std::process::id().to_string(),
                            "-batch",
                            "-ex",
                            "thread apply all bt 30",
                        ])
                        .stdout(
                            std::fs::File::create(Path::new(&dir).join("stall-backtrace.txt"))
                                .map_or(std::process::Stdio::null(), Into::into),
                        )
                        .stderr(std::process::Stdio::null())
                        .status();
                }
                std::process::exit(75);
            }
        }
    });
}

//! The built `memstrata-mcp` binary: the one spawn builder of the tests that run it.

use std::path::Path;
use std::process::Stdio;

use tokio::process::Command;

/// The binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_memstrata-mcp");

/// `memstrata-mcp --store STORE ARGS...` with stdin, stdout and stderr piped, killed if
/// the test drops it, and without `MEMSTRATA_API_KEYS` from the caller's environment
/// (a test passes its keys explicitly). Chain `.env(...)`, `.current_dir(...)` or other
/// `Stdio` settings before `spawn`.
pub fn command(store: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--store")
        .arg(store)
        .args(args)
        .env_remove("MEMSTRATA_API_KEYS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    c
}

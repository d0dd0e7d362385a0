//! Replays the inputs of the `mcp_tool_args` fuzz target (`fuzz/seeds/mcp_tool_args/`
//! and any crash inputs kept in `fuzz/regressions/mcp_tool_args/`) through the same
//! dispatcher with the same checks, so the target's contract holds on every test run,
//! without a nightly toolchain. Input layout: the first byte picks the tool, the rest
//! is a JSON object of arguments; `"$session_id"`-style strings become the latest id
//! of that kind a tool returned.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use memstrata_mcp::fuzzing::{Harness, Outcome, TOOLS};

/// Files of `dir`, sorted by name (none when the directory does not exist).
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn mcp_tool_args_fuzz_inputs_stay_fixed() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let seeds = inputs(&fuzz.join("seeds/mcp_tool_args"));
    let crashes = inputs(&fuzz.join("regressions/mcp_tool_args"));
    assert!(
        seeds.len() >= TOOLS.len(),
        "fuzz/seeds/mcp_tool_args holds a seed per tool"
    );

    // The fuzz target's environment: one temporary store, a full-access caller.
    let mut harness = Harness::new();
    let mut ok = 0;
    let mut tools_run = BTreeSet::new();
    for path in seeds.iter().chain(&crashes) {
        let data = std::fs::read(path).unwrap();
        match harness.run(&data).await {
            Err(broken) => panic!("{}: {broken}", path.display()),
            Ok(Outcome::Skipped) => {}
            Ok(Outcome::Ok(tool)) => {
                tools_run.insert(tool);
                ok += 1;
            }
            Ok(Outcome::Refused(tool)) => {
                tools_run.insert(tool);
            }
        }
    }
    // Every tool was exercised, and the seeds (valid calls, in name order) mostly succeed:
    // sessions, tasks and runs created by earlier seeds are found by later ones.
    assert_eq!(tools_run.len(), TOOLS.len());
    assert!(
        ok * 4 >= seeds.len() * 3,
        "only {ok} of {} seeds succeeded",
        seeds.len()
    );
}

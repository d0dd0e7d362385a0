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

/// The same inputs with authentication on: a key limited to writing `default`, `proj*` and
/// `fuzz-*` (global read only). Every call still answers cleanly, the calls that
/// need more are refused, and the `vault` sentinels never change (checked by the
/// harness after every call).
#[tokio::test]
async fn mcp_tool_args_fuzz_inputs_with_a_restricted_key() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let seeds = inputs(&fuzz.join("seeds/mcp_tool_args"));
    let crashes = inputs(&fuzz.join("regressions/mcp_tool_args"));
    let mut harness = Harness::restricted().await;
    let mut refused = BTreeSet::new();
    let mut succeeded = BTreeSet::new();
    for path in seeds.iter().chain(&crashes) {
        let data = std::fs::read(path).unwrap();
        match harness.run(&data).await {
            Err(broken) => panic!("{}: {broken}", path.display()),
            Ok(Outcome::Skipped) => {}
            Ok(Outcome::Ok(tool)) => {
                succeeded.insert(tool);
            }
            Ok(Outcome::Refused(tool)) => {
                refused.insert(tool);
            }
        }
    }
    // Engine-wide writes need global write: refused. Context reads and writes to
    // `default` work.
    for tool in ["session_create", "llm_punch_in", "memory_optimize"] {
        assert!(refused.contains(tool), "{tool} was not refused");
    }
    for tool in ["context_store", "context_retrieve", "episode_record"] {
        assert!(succeeded.contains(tool), "{tool} did not succeed");
    }
    // Writes aimed at the vault are refused and change nothing.
    for (tool, args) in [
        (
            "context_store",
            r#"{"key":"sentinel","value":9,"namespace":"vault"}"#,
        ),
        ("memory_forget", r#"{"key":"sentinel","namespace":"vault"}"#),
        (
            "knowledge_update",
            r#"{"key":"sentinel","patch":{"s":9},"namespace":"vault"}"#,
        ),
        ("working_focus", r#"{"item":"x","namespace":"vault"}"#),
    ] {
        let i = TOOLS.iter().position(|t| *t == tool).unwrap();
        let mut data = vec![u8::try_from(i).unwrap()];
        data.extend_from_slice(args.as_bytes());
        assert_eq!(
            harness.run(&data).await,
            Ok(Outcome::Refused(tool)),
            "{tool} into the vault"
        );
    }
}

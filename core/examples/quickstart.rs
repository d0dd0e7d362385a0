//! Memstrata quickstart: every layer and the continuity features on an
//! embedded store. Run with `cargo run --release -p memstrata --example quickstart`
//! (pass a directory to keep the store; the default is a temporary one).

use std::time::Duration;

use std::collections::HashMap;
use std::sync::Arc;

use memstrata::{
    Memory, NewEpisode, SearchFilters, admin::OptimizeLevel, procedural::ActionHandler,
    procedural::Step,
};
use serde_json::json;

fn main() -> memstrata::Result<()> {
    let mem = match std::env::args().nth(1) {
        Some(path) => Memory::open(path)?,
        None => Memory::temporary()?,
    };
    println!("opened store at {}", mem.path().display());

    // Short-term: JSON values with an optional TTL.
    mem.short_term().store(
        "draft",
        json!({"text": "hello"}),
        Some(Duration::from_secs(300)),
    )?;
    println!(
        "short_term.retrieve(draft) = {}",
        mem.short_term().retrieve("draft")?.unwrap_or_default()
    );

    // Working memory: bounded focus and workspace.
    mem.working().focus("ship the release")?;
    mem.working()
        .add_to_workspace(json!({"todo": "write changelog"}))?;
    println!(
        "working.current_focus = {:?}",
        mem.working().current_focus()?
    );

    // Episodic: record, then full-text search (BM25) with filters.
    let id = mem.episodic().record(
        NewEpisode::new("Deployed v2 to staging")
            .content(json!({"pr": 42}))
            .participants(["alice"])
            .tags(["deploy"])
            .importance(7),
    )?;
    mem.episodic()
        .record(NewEpisode::new("Reviewed the login flaky test").tags(["bug"]))?;
    let hits = mem
        .episodic()
        .search("staging deploy", &SearchFilters::default(), 5)?;
    println!(
        "episodic.search(\"staging deploy\") -> {} hit(s), top = {:?} (score {:.2})",
        hits.len(),
        hits[0].episode.summary,
        hits[0].score
    );
    println!(
        "episodic.summarize = {}",
        mem.episodic().summarize(&[id])?.trim()
    );

    // Semantic: keyed knowledge, merge-patch updates, history, query.
    mem.semantic()
        .store("user:alice", json!({"role": "admin"}))?;
    let k = mem
        .semantic()
        .update("user:alice", json!({"team": "infra"}))?;
    println!("semantic.update -> {} (version {})", k.knowledge, k.version);
    println!(
        "semantic.query(\"infra\") -> {:?}",
        mem.semantic()
            .query("infra", 5)?
            .iter()
            .map(|h| &h.key)
            .collect::<Vec<_>>()
    );

    // Procedural: a step graph with a CEL branch, a host action and a pause.
    mem.procedural().learn(
        "triage",
        vec![
            Step::new("look", "lookup")
                .description("fetch the ticket")
                .parameters(json!({"id": "{{ params.ticket }}"}))
                .branch("last.severity > 3", "page")
                .branch("true", "note"),
            Step::new("page", "page_oncall").description("page on-call"),
            Step::new("note", "episodic.record")
                .parameters(json!({"summary": "low-severity ticket"})),
        ],
    )?;
    let lookup: Arc<dyn ActionHandler> =
        Arc::new(|p: &serde_json::Value| Ok(json!({"ticket": p["id"], "severity": 5})));
    let actions = HashMap::from([("lookup".to_string(), lookup)]);
    let run = mem
        .procedural()
        .execute("triage", json!({"ticket": 7}), &actions)?;
    println!(
        "procedural.execute(triage) -> {} (pending action {:?})",
        run.status,
        run.pending.as_ref().map(|p| &p.action)
    );
    let run = mem
        .procedural()
        .resume(&run.run_id, json!({"paged": true}), &actions)?;
    println!(
        "procedural.resume -> {} after {} step(s)",
        run.status,
        run.trace.len()
    );

    // Sessions: versioned, compressed snapshots an agent (or another model) restores.
    let s = mem.sessions().create("refactor", json!({"repo": "x"}))?;
    mem.sessions()
        .save(&s.session_id, json!({"step": 1, "notes": "started"}), 0)?;
    let saved =
        mem.sessions()
            .save(&s.session_id, json!({"step": 2, "notes": "tests green"}), 3)?;
    let latest = mem.sessions().restore(&s.session_id, None)?;
    let first = mem.sessions().restore(&s.session_id, Some(1))?;
    println!(
        "sessions: saved v{}, latest = {}, v1 = {}",
        saved.version, latest.content, first.content
    );

    // Contexts store/retrieve with TTL, and the LLM timesheet.
    mem.contexts().store(
        "handoff",
        json!("pick up at step 3"),
        Some(Duration::from_secs(600)),
        Some("project-x"),
    )?;
    let v = mem.contexts().retrieve("handoff", Some("project-x"))?;
    println!(
        "context_retrieve(handoff, project-x) = {:?}",
        v.map(|v| v.value)
    );
    let t = mem
        .timesheet()
        .punch_in("claude", "write tests", Some("the core suite"), None)?;
    let out = mem
        .timesheet()
        .punch_out(&t.task_id, "tests written", false)?;
    println!(
        "timesheet: task {} took {:.3}s",
        t.task_id, out.duration_seconds
    );

    // Contexts: each handle has an active context.
    let r = mem.switch_context("project-x", true)?;
    println!(
        "switch_context -> previous {:?}, loaded {}",
        r.previous_context, r.context_loaded
    );
    mem.switch_context("default", true)?;

    let status = mem.admin().status(true, true)?;
    println!(
        "status: {} (version {}, {} session(s))",
        status.status,
        status.version,
        status.session_count.unwrap_or(0)
    );
    let report = mem.admin().optimize(OptimizeLevel::Light, None)?;
    println!("optimize(light): {} bytes saved", report.bytes_saved);

    mem.flush()?;
    println!("done");
    Ok(())
}

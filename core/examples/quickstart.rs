//! Memstrata quickstart: every layer and the continuity features on an
//! embedded store. Run with `cargo run --release -p memstrata --example quickstart`
//! (pass a directory to keep the store; the default is a temporary one).

use std::time::Duration;

use memstrata::{Memory, NewEpisode, SearchFilters};
use serde_json::json;

fn main() -> memstrata::Result<()> {
    let mem = match std::env::args().nth(1) {
        Some(path) => Memory::open(path)?,
        None => Memory::temporary()?,
    };
    println!("opened store at {}", mem.path().display());

    // Short-term: JSON values with an optional TTL.
    mem.short_term().store("draft", json!({"text": "hello"}), Some(Duration::from_secs(300)))?;
    println!("short_term.retrieve(draft) = {}", mem.short_term().retrieve("draft")?.unwrap_or_default());

    // Working memory: bounded focus and workspace.
    mem.working().focus("ship the release")?;
    mem.working().add_to_workspace(json!({"todo": "write changelog"}))?;
    println!("working.current_focus = {:?}", mem.working().current_focus()?);

    // Episodic: record, then full-text search (BM25) with filters.
    let id = mem.episodic().record(
        NewEpisode::new("Deployed v2 to staging")
            .content(json!({"pr": 42}))
            .participants(["alice"])
            .tags(["deploy"])
            .importance(7),
    )?;
    mem.episodic().record(NewEpisode::new("Reviewed the login flaky test").tags(["bug"]))?;
    let hits = mem.episodic().search("staging deploy", &SearchFilters::default(), 5)?;
    println!("episodic.search(\"staging deploy\") -> {} hit(s), top = {:?} (score {:.2})", hits.len(), hits[0].episode.summary, hits[0].score);
    println!("episodic.summarize = {}", mem.episodic().summarize(&[id])?.trim());

    // Semantic: keyed knowledge, merge-patch updates, history, query.
    mem.semantic().store("user:alice", json!({"role": "admin"}))?;
    let k = mem.semantic().update("user:alice", json!({"team": "infra"}))?;
    println!("semantic.update -> {} (version {})", k.knowledge, k.version);
    println!("semantic.query(\"infra\") -> {:?}", mem.semantic().query("infra", 5)?.iter().map(|h| &h.key).collect::<Vec<_>>());

    // Contexts: each handle has an active context.
    let r = mem.switch_context("project-x", true)?;
    println!("switch_context -> previous {:?}, loaded {}", r.previous_context, r.context_loaded);
    mem.switch_context("default", true)?;

    mem.flush()?;
    println!("done");
    Ok(())
}

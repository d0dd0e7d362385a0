//! The last handle of a PostgreSQL store dropped inside async code.
//!
//! The `postgres` client blocks on a runtime of its own, which tokio refuses on
//! a thread that drives an async runtime; closing the store's connections
//! there used to panic in a destructor and abort the process (the MCP server's
//! session tasks dropped their handles while its runtime shut down).

use std::time::{Duration, Instant};

use super::*;

/// Connections of this database whose `application_name` is `app`.
fn connections(pg: &mut postgres::Client, app: &str) -> i64 {
    pg.query_one(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
        &[&app],
    )
    .unwrap()
    .get(0)
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn the_last_handle_dropped_inside_a_task_closes_the_store() {
    let dir = pg_dir();
    let app = format!("memstrata_async_drop_{}", std::process::id());
    let url = format!("{}&application_name={app}", dir.path().display());
    let mem = Memory::open(&url).unwrap();
    let id = mem
        .episodic()
        .record(NewEpisode::new("closed from inside a task"))
        .unwrap();
    let mut pg = client();
    assert!(
        connections(&mut pg, &app) > 0,
        "the store keeps an idle connection"
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // The task runs on the thread that drives the runtime.
    let dropped = rt.block_on(async move { tokio::spawn(async move { drop(mem) }).await });
    assert!(dropped.is_ok(), "dropping the store failed: {dropped:?}");

    // Its connections are closed: the server ends their sessions (a liveness
    // bound, not a timing check).
    let deadline = Instant::now() + Duration::from_secs(30);
    while connections(&mut pg, &app) > 0 {
        assert!(
            Instant::now() < deadline,
            "the store's connections stayed open"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mem = Memory::open(&url).unwrap();
    assert!(mem.episodic().get(&id).unwrap().is_some());
}

//! The adapter against a real PostgreSQL server: the LISTEN/NOTIFY bridge that carries
//! resource changes between instances sharing one store, and the admin commands on a
//! `postgres://` URL.
//!
//! These tests need a server: they are ignored by a plain `cargo test` and run by
//! `make test-pg` (scripts/pg-test.sh starts PostgreSQL and sets MEMSTRATA_TEST_PG_URL;
//! scripts/test-mcp-pg.sh runs them with `--include-ignored`). Without the variable
//! they fail rather than pass vacuously.

use std::time::Duration;

use memstrata::Memory;
use memstrata_mcp::Change;
use memstrata_mcp::backend::PgUrl;
use memstrata_mcp::{Auth, Shared};
use tokio::sync::broadcast;
use tokio_postgres::NoTls;
use tokio_util::sync::CancellationToken;

const NEEDS_PG: &str = "needs PostgreSQL: run through scripts/pg-test.sh (make test-pg)";

fn base_url() -> String {
    std::env::var("MEMSTRATA_TEST_PG_URL").unwrap_or_else(|_| {
        panic!("MEMSTRATA_TEST_PG_URL is not set: {NEEDS_PG}");
    })
}

/// A URL on a schema no other test uses.
fn url(schema: &str) -> PgUrl {
    let u = format!("{}?schema={schema}_{}", base_url(), std::process::id());
    PgUrl::parse(&u).expect("test URL")
}

/// One instance's shared state with a started bridge. The engine is a temporary sled
/// store: the bridge only carries change notices, whatever the backend.
async fn instance(url: &PgUrl, stop: &CancellationToken) -> std::sync::Arc<Shared> {
    let shared = Shared::new(Memory::temporary().unwrap(), Auth::disabled(), false).unwrap();
    assert!(shared.bridge_postgres(url, stop.clone()));
    assert!(
        !shared.bridge_postgres(url, stop.clone()),
        "one bridge per instance"
    );
    let b = shared.bridge().unwrap();
    assert!(
        b.wait_listening(Duration::from_secs(30)).await,
        "the bridge did not connect to {url}"
    );
    shared
}

fn change(i: usize) -> Change {
    Change {
        uri: format!("memstrata://team/knowledge/k{i}"),
        context: Some("team".into()),
        list_changed: i.is_multiple_of(2),
    }
}

/// The next change on `rx`, failing after a generous deadline (a liveness bound, not a timing check).
async fn next(rx: &mut broadcast::Receiver<Change>) -> Change {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("no change notice arrived")
        .expect("hub closed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run through scripts/pg-test.sh (make test-pg)"]
async fn changes_cross_instances_on_one_schema_only() {
    let stop = CancellationToken::new();
    let u = url("bridge");
    let a = instance(&u, &stop).await;
    let b = instance(&u, &stop).await;
    let other = instance(&url("elsewhere"), &stop).await;
    assert_ne!(
        a.bridge().unwrap().instance(),
        b.bridge().unwrap().instance()
    );

    let mut at_a = a.changes();
    let mut at_b = b.changes();
    let mut at_other = other.changes();

    // 300 changes published through A, in one burst (several notifications' worth).
    let sent: Vec<Change> = (0..300).map(change).collect();
    a.publish(sent.clone());
    let mut got_b = Vec::new();
    while got_b.len() < sent.len() {
        got_b.push(next(&mut at_b).await);
    }
    assert_eq!(got_b, sent, "B hears A's changes, in order");
    // A's own subscribers hear each change once: the echo of its own NOTIFY is ignored.
    for c in &sent {
        assert_eq!(&next(&mut at_a).await, c);
    }

    // And back: a change through B reaches A; B's own subscribers hear it once.
    let back = Change {
        uri: "memstrata://sessions".into(),
        context: None,
        list_changed: true,
    };
    b.publish(vec![back.clone()]);
    assert_eq!(next(&mut at_a).await, back);
    assert_eq!(next(&mut at_b).await, back);

    // A marker sent through A after everything else: once B has it, any echo of B's own
    // change, or a duplicate, would have arrived before it.
    let marker = change(10_000);
    a.publish(vec![marker.clone()]);
    assert_eq!(next(&mut at_b).await, marker);
    assert_eq!(next(&mut at_a).await, marker);
    assert!(matches!(
        at_a.try_recv(),
        Err(broadcast::error::TryRecvError::Empty)
    ));
    assert!(matches!(
        at_b.try_recv(),
        Err(broadcast::error::TryRecvError::Empty)
    ));

    // The instance on another schema heard nothing of it; its own changes still flow.
    let own = change(7);
    other.publish(vec![own.clone()]);
    assert_eq!(next(&mut at_other).await, own);
    assert!(matches!(
        at_other.try_recv(),
        Err(broadcast::error::TryRecvError::Empty)
    ));
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run through scripts/pg-test.sh (make test-pg)"]
async fn the_bridge_reconnects_after_its_connection_is_killed() {
    let stop = CancellationToken::new();
    let u = url("reconnect");
    let a = instance(&u, &stop).await;
    let b = instance(&u, &stop).await;
    let mut at_b = b.changes();

    // Terminate both instances' bridge connections (found by application_name).
    let (admin, conn) = tokio_postgres::connect(u.connect_str(), NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let names: Vec<String> = [&a, &b]
        .iter()
        .map(|s| {
            format!(
                "{} {}",
                memstrata_mcp::backend::APPLICATION_NAME,
                s.bridge().unwrap().instance()
            )
        })
        .collect();
    let killed = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ANY($1)",
            &[&names],
        )
        .await
        .unwrap()
        .len();
    assert_eq!(killed, 2, "terminated {killed} bridge connections");

    // Changes published after the kill arrive once the bridges are back: publish until
    // B hears one (those sent while A was reconnecting may be lost: notices are hints).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut i = 0;
    loop {
        i += 1;
        a.publish(vec![change(i)]);
        match tokio::time::timeout(Duration::from_millis(500), at_b.recv()).await {
            Ok(Ok(c)) => {
                assert_eq!(c.context.as_deref(), Some("team"));
                break;
            }
            Ok(Err(e)) => panic!("hub: {e}"),
            Err(_) => assert!(
                tokio::time::Instant::now() < deadline,
                "no change crossed instances after the bridges were killed"
            ),
        }
    }
    assert!(
        a.bridge()
            .unwrap()
            .wait_listening(Duration::from_secs(30))
            .await
    );
    assert!(
        b.bridge()
            .unwrap()
            .wait_listening(Duration::from_secs(30))
            .await
    );
    stop.cancel();
}

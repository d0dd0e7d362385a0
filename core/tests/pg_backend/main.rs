//! PostgreSQL-only behaviour: URL and schema handling, migrations, several
//! engines (instances) on one database, moving a store between backends.
//!
//! Always on PostgreSQL (the layers themselves are covered on both backends by
//! the conformance suites): needs `--features postgres` and
//! `MEMSTRATA_TEST_PG_URL`, and fails without the URL rather than skip. The
//! tests are `#[ignore]`d so that `cargo test --workspace` (where the adapter's
//! dependency turns the `postgres` feature on) does not run them without a
//! server; `make test-pg` runs them with `--include-ignored`.
#![cfg(feature = "postgres")]

#[path = "../common/mod.rs"]
mod common;

mod async_drop;
mod backends;
mod instances;
mod schema;
mod search;
mod urls;

use std::path::Path;

use memstrata::{Error, Memory, NewEpisode, SearchFilters};
use serde_json::json;

fn base_url() -> String {
    std::env::var("MEMSTRATA_TEST_PG_URL").unwrap_or_else(|_| {
        panic!("the PostgreSQL backend tests need MEMSTRATA_TEST_PG_URL (e.g. postgres://postgres@127.0.0.1:54329/postgres)")
    })
}

/// A store location on PostgreSQL whatever MEMSTRATA_TEST_BACKEND says.
fn pg_dir() -> common::TestDir {
    assert!(!base_url().is_empty());
    common::pg_tempdir()
}

fn client() -> postgres::Client {
    postgres::Client::connect(&base_url(), postgres::NoTls).expect("connect")
}

/// One more engine (instance) on the store at `url`, as another process would open it.
fn separate_engine(url: &Path) -> Memory {
    Memory::builder()
        .path(url)
        .separate_engine()
        .open()
        .unwrap()
}

fn ids(hits: &[memstrata::episodic::EpisodeHit]) -> Vec<String> {
    hits.iter().map(|h| h.episode.id.clone()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn search_docs_rows(schema: &str, condition: &str) -> i64 {
    client()
        .query_one(
            &format!("SELECT count(*) FROM \"{schema}\".search_docs WHERE {condition}"),
            &[],
        )
        .unwrap()
        .get(0)
}

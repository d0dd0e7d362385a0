//! Store locations for the backend conformance suites.
//!
//! Every suite that must hold on both backends opens its stores through
//! [`tempdir`] / [`temporary`]. By default they are sled stores in temporary
//! directories. With `MEMSTRATA_TEST_BACKEND=postgres` each store is a fresh
//! schema on the database at `MEMSTRATA_TEST_PG_URL` (dropped at the end); the
//! test binary must then be built with `--features postgres`. A missing URL
//! panics: the PostgreSQL run fails loudly, it never skips.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memstrata::Memory;

/// Which backend the conformance suites run on.
pub fn backend_is_postgres() -> bool {
    match std::env::var("MEMSTRATA_TEST_BACKEND").as_deref() {
        Ok("postgres") => true,
        Ok("sled") | Ok("") | Err(_) => false,
        Ok(other) => panic!("MEMSTRATA_TEST_BACKEND={other:?}: use sled or postgres"),
    }
}

fn pg_base_url() -> String {
    match std::env::var("MEMSTRATA_TEST_PG_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "MEMSTRATA_TEST_BACKEND=postgres needs MEMSTRATA_TEST_PG_URL (e.g. postgres://postgres@127.0.0.1:54329/postgres): \
             the PostgreSQL conformance run never skips"
        ),
    }
}

fn unique_schema() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "t_{}_{}_{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// `dir/name` for a sled store directory; a PostgreSQL store URL is returned as is
/// (it names its own schema already).
pub fn store_under(dir: &Path, name: &str) -> PathBuf {
    let s = dir.to_string_lossy();
    if s.starts_with("postgres://") || s.starts_with("postgresql://") {
        dir.to_owned()
    } else {
        dir.join(name)
    }
}

/// A place for stores: a temporary directory, plus (PostgreSQL) the schemas handed out.
pub struct TestDir {
    dir: tempfile::TempDir,
    pg: Option<(String, String, std::sync::Mutex<Vec<String>>)>,
}

/// A fresh place for stores on the backend under test.
pub fn tempdir() -> TestDir {
    make_dir(backend_is_postgres())
}

/// A fresh place for PostgreSQL stores whatever the backend under test.
pub fn pg_tempdir() -> TestDir {
    make_dir(true)
}

fn make_dir(postgres: bool) -> TestDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    let pg = postgres.then(|| {
        (
            pg_base_url(),
            unique_schema(),
            std::sync::Mutex::new(Vec::new()),
        )
    });
    TestDir { dir, pg }
}

impl TestDir {
    /// The main store's location (sled: the directory; PostgreSQL: a URL with its own schema).
    pub fn path(&self) -> PathBuf {
        self.store("")
    }

    /// Another store named `name` (sled: `<dir>/<name>`; PostgreSQL: its own schema).
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        let name = name.as_ref().to_string_lossy().into_owned();
        self.store(&name)
    }

    /// The real temporary directory (for files: exports, logs).
    pub fn fs(&self) -> &Path {
        self.dir.path()
    }

    fn store(&self, name: &str) -> PathBuf {
        match &self.pg {
            None if name.is_empty() => self.dir.path().to_owned(),
            None => self.dir.path().join(name),
            Some((url, base, used)) => {
                let suffix: String = name
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() {
                            c.to_ascii_lowercase()
                        } else {
                            '_'
                        }
                    })
                    .collect();
                let schema = if suffix.is_empty() {
                    base.clone()
                } else {
                    format!("{base}_{suffix}")
                };
                let mut used = used.lock().unwrap();
                if !used.contains(&schema) {
                    used.push(schema.clone());
                }
                let sep = if url.contains('?') { '&' } else { '?' };
                PathBuf::from(format!("{url}{sep}schema={schema}"))
            }
        }
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let Some((url, _, used)) = &self.pg else {
            return;
        };
        let schemas = used.lock().map(|u| u.clone()).unwrap_or_default();
        if schemas.is_empty() {
            return;
        }
        // Engines close when their last handle drops; a maintenance thread may
        // still be finishing: DROP waits for its locks.
        match postgres::Client::connect(url, postgres::NoTls) {
            Ok(mut c) => {
                for s in schemas {
                    if let Err(e) =
                        c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{s}\" CASCADE"))
                    {
                        eprintln!("test cleanup: cannot drop schema {s}: {e}");
                    }
                }
            }
            Err(e) => eprintln!("test cleanup: cannot connect to {url}: {e}"),
        }
    }
}

/// A store that lives as long as the value (the counterpart of `Memory::temporary()`).
pub struct TempMemory {
    mem: Option<Memory>,
    _dir: TestDir,
}

impl std::ops::Deref for TempMemory {
    type Target = Memory;
    fn deref(&self) -> &Memory {
        self.mem.as_ref().expect("open")
    }
}

impl Drop for TempMemory {
    fn drop(&mut self) {
        // Close the store before its schema / directory goes.
        self.mem.take();
    }
}

/// A fresh store on the backend under test.
pub fn temporary() -> memstrata::Result<TempMemory> {
    let dir = tempdir();
    let mem = Memory::open(dir.path())?;
    Ok(TempMemory {
        mem: Some(mem),
        _dir: dir,
    })
}

/// The schema named by a `postgres://...?schema=NAME` store URL.
pub fn schema_of(url: &Path) -> String {
    url.to_str()
        .unwrap()
        .split("schema=")
        .nth(1)
        .unwrap()
        .to_owned()
}

/// The migration versions recorded in `schema`, ascending.
pub fn migration_versions(client: &mut postgres::Client, schema: &str) -> Vec<i32> {
    client
        .query(
            &format!("SELECT version FROM \"{schema}\".schema_migrations ORDER BY version"),
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Iterations of the SIGKILL tests (`MEMSTRATA_CRASH_ITERS`, default 3).
pub fn crash_iterations() -> usize {
    std::env::var("MEMSTRATA_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// Deterministic pseudo-random numbers (xorshift), seeded per iteration.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

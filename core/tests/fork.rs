//! Fork safety: a handle carried across `fork()` fails with `Error::Forked` at
//! once, for every call, without touching the parent's store, and the child can
//! not start sled again (its I/O thread pool does not survive fork()).
//!
//! The child runs the calls and reports through a pipe (one bit per call that
//! failed with `Forked`), then leaves with `_exit` so that no destructor or
//! test-harness code of the copied process runs. A hung child is killed by
//! `alarm`, and the parent then reads no result.
#![cfg(unix)]
#![allow(unsafe_code)]

use std::path::Path;

use memstrata::{Durability, Error, Memory, NewEpisode, SearchFilters};
use serde_json::json;

/// Seconds after which a stuck child is killed (only to keep CI from hanging).
const CHILD_ALARM_SECS: u32 = 120;

/// One test of this file at a time. A child forked while another thread of
/// the parent is inside `Memory::open` inherits the registry lock locked
/// (docs/multiprocess.md names this window); the children here open stores,
/// so no other test of this file may be opening one when they are forked.
fn one_forking_test_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A forked child running a closure.
struct Child {
    pid: libc::pid_t,
    read_end: i32,
}

/// Fork; run `child` in the child, send its result to the parent through a
/// pipe and `_exit`. In the parent, `child` (and what it captured) is dropped.
fn start_child(child: impl FnOnce() -> u32) -> Child {
    let mut fds = [0; 2];
    // SAFETY: creates a pipe into a local array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe failed");
    let [read_end, write_end] = fds;
    // SAFETY: the child runs `child` (engine calls that return at once, or a
    // fresh open of a store) and leaves with `_exit`, never returning into the
    // test harness of the copied process.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: plain libc calls on the child's own descriptors; `_exit`
        // ends the child without running the copied process's destructors.
        unsafe {
            libc::close(read_end);
            libc::alarm(CHILD_ALARM_SECS);
            if let Ok(r) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)) {
                let bytes = r.to_le_bytes();
                libc::write(write_end, bytes.as_ptr().cast(), bytes.len());
            }
            libc::_exit(0)
        }
    }
    // SAFETY: our own descriptor.
    unsafe {
        libc::close(write_end);
    }
    Child { pid, read_end }
}

impl Child {
    /// The child's result, or `None` if it sent none (it panicked, or hung and
    /// was killed by the alarm).
    fn result(self) -> Option<u32> {
        // SAFETY: our own descriptor and child.
        unsafe {
            let mut buf = [0u8; 4];
            let n = libc::read(self.read_end, buf.as_mut_ptr().cast(), buf.len());
            libc::close(self.read_end);
            let mut status = 0;
            assert_eq!(
                libc::waitpid(self.pid, &mut status, 0),
                self.pid,
                "waitpid failed"
            );
            (n == 4).then(|| u32::from_le_bytes(buf))
        }
    }
}

fn is_forked(r: Result<impl Sized, Error>) -> bool {
    matches!(r, Err(Error::Forked { .. }))
}

/// One call on an inherited handle: true when it failed with `Forked`.
type Call = Box<dyn Fn(&Memory) -> bool>;

/// Every call a child could make on an inherited handle; bit `i` of the
/// result is set when call `i` failed with `Forked`.
fn calls_in_child(mem: Memory) -> u32 {
    let calls: Vec<Call> = vec![
        Box::new(|m| is_forked(m.short_term().store("child", json!(1), None))),
        Box::new(|m| is_forked(m.short_term().retrieve("parent"))),
        Box::new(|m| is_forked(m.episodic().record(NewEpisode::new("child episode")))),
        Box::new(|m| is_forked(m.episodic().search("parent", &SearchFilters::default(), 5))),
        Box::new(|m| is_forked(m.semantic().store("child", json!({"x": 1})))),
        Box::new(|m| is_forked(m.flush())),
        Box::new(|m| is_forked(m.admin().status(false, false))),
        Box::new(|m| is_forked(m.contexts().list())),
        Box::new(|m| is_forked(m.namespace("other"))),
        Box::new(|m| is_forked(m.sessions().create("s", json!({})))),
        Box::new(|m| is_forked(m.admin().export(&mut Vec::new()))),
        Box::new(|m| is_forked(m.working().focus("child"))),
        Box::new(|m| is_forked(m.procedural().list())),
    ];
    let mut bits = 0;
    for (i, call) in calls.iter().enumerate() {
        if call(&mem) {
            bits |= 1 << i;
        }
    }
    // Dropping the last handle (what a binding's close does after its flush
    // failed) must return at once and release nothing of the parent's.
    drop(mem);
    bits
}

const CALLS: u32 = 13;
/// Every call failed with `Forked`, and so did opening the store again.
const ALL_OK: u32 = (1 << (CALLS + 1)) - 1;

fn open(path: &Path, durability: Durability) -> Memory {
    Memory::builder()
        .path(path)
        .durability(durability)
        .open()
        .unwrap()
}

#[test]
fn an_inherited_handle_fails_with_forked_and_the_parent_store_is_intact() {
    let _serial = one_forking_test_at_a_time();
    for durability in [
        Durability::Immediate,
        Durability::Periodic(50),
        Durability::Manual,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mem = open(dir.path(), durability);
        mem.short_term().store("parent", json!("p"), None).unwrap();
        mem.episodic()
            .record(NewEpisode::new("parent episode"))
            .unwrap();
        let child_mem = mem.clone();
        let path = dir.path().to_owned();
        let bits = start_child(move || {
            let mut bits = calls_in_child(child_mem);
            // Opening the store again: refused at once (the inherited engine
            // is not handed out, and sled cannot start in a forked child).
            if is_forked(Memory::open(&path)) {
                bits |= 1 << CALLS;
            }
            bits
        })
        .result();
        let bits = bits.expect("the child hung or panicked");
        assert_eq!(
            bits,
            ALL_OK,
            "{durability:?}: checks that failed (bit i = call i): {:#b}",
            !bits & ALL_OK
        );
        // The parent goes on, and its store holds exactly its own writes.
        mem.short_term()
            .store("parent2", json!("p2"), None)
            .unwrap();
        assert_eq!(mem.short_term().keys("").unwrap(), ["parent", "parent2"]);
        assert_eq!(mem.semantic().keys("").unwrap(), Vec::<String>::new());
        let hits = mem
            .episodic()
            .search("episode", &SearchFilters::default(), 10)
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].episode.summary, "parent episode");
        drop(mem);
        let again = open(dir.path(), durability);
        assert_eq!(again.short_term().keys("").unwrap(), ["parent", "parent2"]);
        assert_eq!(again.episodic().recent(10).unwrap().len(), 1);
    }
}

#[test]
fn a_child_cannot_start_sled_again_even_after_the_parent_closed_it() {
    let _serial = one_forking_test_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mem = open(dir.path(), Durability::Immediate);
    mem.short_term().store("parent", json!("p"), None).unwrap();
    let path = dir.path().to_owned();
    // The parent closes before the child opens: a pipe orders the two.
    let mut fds = [0; 2];
    // SAFETY: creates a pipe into a local array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [closed_read, closed_write] = fds;
    let child_mem = mem.clone();
    let child = start_child(move || {
        let mut byte = 0u8;
        // SAFETY: reads one byte from the inherited pipe.
        unsafe {
            libc::read(closed_read, (&raw mut byte).cast(), 1);
        }
        let mut bits = u32::from(is_forked(child_mem.short_term().retrieve("parent")));
        drop(child_mem);
        // sled's I/O threads do not exist here: opening any sled store (this
        // one, or a new one) is refused at once instead of hanging later.
        bits |= u32::from(is_forked(Memory::open(&path))) << 1;
        bits |= u32::from(is_forked(Memory::temporary())) << 2;
        bits
    });
    // The parent closes (its last handle: `start_child` dropped the clone),
    // then lets the child go on.
    drop(mem);
    // SAFETY: writes one byte to our pipe, then closes both ends.
    unsafe {
        libc::write(closed_write, [1u8].as_ptr().cast(), 1);
        libc::close(closed_write);
        libc::close(closed_read);
    }
    assert_eq!(
        child.result(),
        Some(0b111),
        "child results (bit 0: inherited handle, 1: same store, 2: a new store)"
    );
    let again = open(dir.path(), Durability::Immediate);
    assert_eq!(again.short_term().keys("").unwrap(), ["parent"]);
}

/// A child made by a bare `fork()` that stays alive does not keep the store
/// locked: the parent closes the store and opens it again while the child
/// lives (before the fork handler detached the child from `<store>/LOCK` and
/// sled's data file, this reopen failed with `StoreLocked`). tantivy's lock
/// files need nothing: tantivy deletes a lock file when it releases it, so a
/// child's inherited lock is on a file nobody opens again. The child's handle
/// still fails with `Forked`.
#[test]
fn a_live_child_does_not_keep_the_store_locked() {
    let _serial = one_forking_test_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mem = open(dir.path(), Durability::Immediate);
    mem.episodic()
        .record(NewEpisode::new("before the fork"))
        .unwrap();
    let mut fds = [0; 2];
    // SAFETY: creates a pipe into a local array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [go_read, go_write] = fds;
    let child_mem = mem.clone();
    let child = start_child(move || {
        let mut byte = 0u8;
        // SAFETY: blocks on the inherited pipe until the parent is done.
        unsafe {
            libc::read(go_read, (&raw mut byte).cast(), 1);
        }
        u32::from(is_forked(child_mem.episodic().recent(1)))
    });
    // The child is alive (waiting on the pipe) through all of this.
    drop(mem);
    let again = Memory::builder()
        .path(dir.path())
        .durability(Durability::Immediate)
        .open()
        .expect("reopen while a forked child lives");
    again
        .episodic()
        .record(NewEpisode::new("after the fork"))
        .unwrap();
    let hits = again
        .episodic()
        .search("fork", &SearchFilters::default(), 10)
        .unwrap();
    assert_eq!(hits.len(), 2);
    drop(again);
    // SAFETY: writes one byte to our pipe, then closes both ends.
    unsafe {
        libc::write(go_write, [1u8].as_ptr().cast(), 1);
        libc::close(go_write);
        libc::close(go_read);
    }
    assert_eq!(
        child.result(),
        Some(1),
        "the child's handle fails with Forked"
    );
    let last = open(dir.path(), Durability::Immediate);
    assert_eq!(last.episodic().recent(10).unwrap().len(), 2);
}

#[test]
fn the_message_says_what_to_do() {
    let _serial = one_forking_test_at_a_time();
    let e = Error::Forked {
        opened_in: 1234,
        current: 5678,
    };
    assert_eq!(e.code(), "FORKED");
    let m = e.to_string();
    for part in [
        "process 1234",
        "process 5678",
        "fork()",
        "PostgreSQL",
        "memstrata-mcp",
    ] {
        assert!(m.contains(part), "{part} missing from: {m}");
    }
}

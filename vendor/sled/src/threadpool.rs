//! A simple adaptive threadpool that returns a oneshot future.

use std::{
    collections::VecDeque,
    sync::atomic::{AtomicBool, Ordering::Relaxed},
    thread,
    time::{Duration, Instant},
};

use parking_lot::{Condvar, Mutex};

use crate::{
    debug_delay, warn, Acquire, AtomicUsize, Error, Lazy, OneShot, Result,
    SeqCst,
};

// This is lower for CI reasons.
#[cfg(windows)]
const MAX_THREADS: usize = 16;

#[cfg(not(windows))]
const MAX_THREADS: usize = 128;

const DESIRED_WAITING_THREADS: usize = 7;

static WAITING_THREAD_COUNT: AtomicUsize = AtomicUsize::new(0);
static TOTAL_THREAD_COUNT: AtomicUsize = AtomicUsize::new(0);
static SPAWNS: AtomicUsize = AtomicUsize::new(0);
static SPAWNING: AtomicBool = AtomicBool::new(false);
/// Memstrata patch: bumped by [`release_idle_threads`]; a worker started
/// under an older value exits once the queue is empty.
static RELEASE_GEN: AtomicUsize = AtomicUsize::new(0);
/// Memstrata patch: set while the resident workers are being started again
/// after a release.
static RESPAWNING: AtomicBool = AtomicBool::new(false);
/// Memstrata patch: the workers' join handles, with the release generation
/// each started under (finished ones are dropped at the next spawn).
static HANDLES: Mutex<Vec<(usize, thread::JoinHandle<()>)>> =
    parking_lot::const_mutex(Vec::new());

type Work = Box<dyn FnOnce() + Send + 'static>;

struct Queue {
    cv: Condvar,
    mu: Mutex<VecDeque<Work>>,
}

impl Queue {
    fn recv_timeout(
        &self,
        duration: Duration,
        generation: usize,
    ) -> Option<Work> {
        let mut queue = self.mu.lock();

        let cutoff = Instant::now() + duration;

        while queue.is_empty() {
            WAITING_THREAD_COUNT.fetch_add(1, SeqCst);
            let res = self.cv.wait_until(&mut queue, cutoff);
            WAITING_THREAD_COUNT.fetch_sub(1, SeqCst);
            // Memstrata patch: a release wakes the waiting workers to exit.
            if res.timed_out() || RELEASE_GEN.load(Acquire) != generation {
                break;
            }
        }

        queue.pop_front()
    }

    fn try_recv(&self) -> Option<Work> {
        let mut queue = self.mu.lock();
        queue.pop_front()
    }

    /// Queue `work`; returns the queue's length and the number of workers,
    /// both read under the queue's lock (workers only exit under it, and
    /// only when the queue is empty: see `exit_if_idle`).
    fn send(&self, work: Work) -> (usize, usize) {
        let mut queue = self.mu.lock();
        queue.push_back(work);

        let len = queue.len();
        let workers = TOTAL_THREAD_COUNT.load(Acquire);

        // having held the mutex makes this linearized
        // with the notify below.
        drop(queue);

        self.cv.notify_all();

        (len, workers)
    }

    /// Memstrata patch: a worker leaves the pool only here, under the
    /// queue's lock and only when no task waits, so a task queued by `send`
    /// either finds a worker that will run it or sees no worker at all (and
    /// starts them again).
    fn exit_if_idle(&self) -> bool {
        let queue = self.mu.lock();
        if queue.is_empty() {
            TOTAL_THREAD_COUNT.fetch_sub(1, SeqCst);
            true
        } else {
            false
        }
    }
}

static QUEUE: Lazy<Queue, fn() -> Queue> = Lazy::new(init_queue);
static BROKEN: AtomicBool = AtomicBool::new(false);

fn init_queue() -> Queue {
    debug_delay();
    for _ in 0..DESIRED_WAITING_THREADS {
        debug_delay();
        if let Err(e) = spawn_new_thread(true) {
            log::error!("failed to initialize threadpool: {:?}", e);
        }
    }
    Queue { cv: Condvar::new(), mu: Mutex::new(VecDeque::new()) }
}

/// Runs tasks until this worker leaves the pool (having decremented
/// `TOTAL_THREAD_COUNT` under the queue's lock); returns whether it left
/// because of [`release_idle_threads`].
fn perform_work(is_immortal: bool, generation: usize) -> bool {
    let wait_limit = Duration::from_secs(1);

    let mut performed = 0;
    let mut contiguous_overshoots = 0;

    loop {
        let released = RELEASE_GEN.load(Acquire) != generation;
        if (released || !(is_immortal || performed < 5 || contiguous_overshoots < 3))
            && QUEUE.exit_if_idle()
        {
            return released;
        }
        debug_delay();
        let task_res = QUEUE.recv_timeout(wait_limit, generation);

        if let Some(task) = task_res {
            WAITING_THREAD_COUNT.fetch_sub(1, SeqCst);
            (task)();
            WAITING_THREAD_COUNT.fetch_add(1, SeqCst);
            performed += 1;
        }

        while let Some(task) = QUEUE.try_recv() {
            debug_delay();
            WAITING_THREAD_COUNT.fetch_sub(1, SeqCst);
            (task)();
            WAITING_THREAD_COUNT.fetch_add(1, SeqCst);
            performed += 1;
        }

        debug_delay();

        let waiting = WAITING_THREAD_COUNT.load(Acquire);

        if waiting > DESIRED_WAITING_THREADS {
            contiguous_overshoots += 1;
        } else {
            contiguous_overshoots = 0;
        }
    }
}

/// Memstrata patch: ask every worker to leave the pool once no task waits,
/// and wait (up to `limit`) until each of them has ended; returns whether
/// all did. A thread that ends hands its allocator cache and arena back to
/// the allocator (glibc keeps up to a few hundred freed chunks per thread in
/// its thread cache, and they pin the heap pages around them) and its epoch
/// bag to the global queue, so an embedder that closed its last `Db` can
/// return that memory. Workers are started again by the next task (see
/// `spawn`).
#[doc(hidden)]
pub fn release_idle_threads(limit: Duration) -> bool {
    let generation = RELEASE_GEN.fetch_add(1, SeqCst) + 1;
    if TOTAL_THREAD_COUNT.load(Acquire) > 0 {
        let _queue = QUEUE.mu.lock();
        QUEUE.cv.notify_all();
    }
    let deadline = Instant::now() + limit;
    loop {
        let mut handles = HANDLES.lock();
        let mut i = 0;
        while i < handles.len() {
            if handles[i].1.is_finished() {
                let (_, h) = handles.swap_remove(i);
                let _ = h.join();
            } else {
                i += 1;
            }
        }
        if handles.iter().all(|(g, _)| *g >= generation) {
            return true;
        }
        drop(handles);
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// Memstrata patch: the number of I/O worker threads alive.
#[doc(hidden)]
pub fn worker_count() -> usize {
    TOTAL_THREAD_COUNT.load(Acquire)
}

/// Start the resident workers again after a release.
fn respawn_resident_workers() {
    if RESPAWNING.compare_exchange(false, true, SeqCst, SeqCst).is_err() {
        return;
    }
    for _ in 0..DESIRED_WAITING_THREADS {
        if let Err(e) = spawn_new_thread(true) {
            log::error!("failed to restart threadpool: {:?}", e);
        }
    }
    RESPAWNING.store(false, SeqCst);
}

// Create up to MAX_THREADS dynamic blocking task worker threads.
// Dynamic threads will terminate themselves if they don't
// receive any work after one second.
fn maybe_spawn_new_thread() -> Result<()> {
    debug_delay();
    let total_workers = TOTAL_THREAD_COUNT.load(Acquire);
    debug_delay();
    let waiting_threads = WAITING_THREAD_COUNT.load(Acquire);

    if waiting_threads >= DESIRED_WAITING_THREADS
        || total_workers >= MAX_THREADS
    {
        return Ok(());
    }

    if !SPAWNING.compare_and_swap(false, true, SeqCst) {
        spawn_new_thread(false)?;
    }

    Ok(())
}

fn spawn_new_thread(is_immortal: bool) -> Result<()> {
    if BROKEN.load(Relaxed) {
        return Err(Error::ReportableBug(
            "IO thread unexpectedly panicked. please report \
            this bug on the sled github repo."
                .to_string(),
        ));
    }

    let spawn_id = SPAWNS.fetch_add(1, SeqCst);

    TOTAL_THREAD_COUNT.fetch_add(1, SeqCst);
    let generation = RELEASE_GEN.load(Acquire);
    let spawn_res = thread::Builder::new()
        .name(format!("sled-io-{}", spawn_id))
        .spawn(move || {
            SPAWNING.store(false, SeqCst);
            debug_delay();
            let res = std::panic::catch_unwind(|| {
                perform_work(is_immortal, generation)
            });
            // A panic, or an immortal worker that ended without a release.
            let broken = match res {
                Err(_) => {
                    TOTAL_THREAD_COUNT.fetch_sub(1, SeqCst);
                    true
                }
                Ok(released) => is_immortal && !released,
            };
            if broken {
                // IO thread panicked, shut down the system
                log::error!(
                    "IO thread unexpectedly terminated.
                    please report this error at the sled github repo. {:?}",
                    res
                );
                BROKEN.store(true, SeqCst);
            }
        });

    let spawn_res = spawn_res.map(|h| {
        let mut handles = HANDLES.lock();
        handles.retain(|(_, h)| !h.is_finished());
        handles.push((generation, h));
    });

    if let Err(e) = spawn_res {
        static E: AtomicBool = AtomicBool::new(false);

        TOTAL_THREAD_COUNT.fetch_sub(1, SeqCst);

        SPAWNING.store(false, SeqCst);

        if !E.compare_and_swap(false, true, Relaxed) {
            // only execute this once
            warn!(
                "Failed to dynamically increase the threadpool size: {:?}.",
                e,
            )
        }
    }

    Ok(())
}

/// Spawn a function on the threadpool.
pub fn spawn<F, R>(work: F) -> Result<OneShot<R>>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static + Sized,
{
    let (promise_filler, promise) = OneShot::pair();
    let task = move || {
        let result = (work)();
        promise_filler.fill(result);
    };

    let (depth, workers) = QUEUE.send(Box::new(task));

    if workers == 0 {
        respawn_resident_workers();
    } else if depth > DESIRED_WAITING_THREADS {
        maybe_spawn_new_thread()?;
    }

    Ok(promise)
}

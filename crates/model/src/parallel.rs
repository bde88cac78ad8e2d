//! A second thread for long blocks of positions.
//!
//! One persistent worker, started on first use and parked on a condition variable between
//! passes, runs half of a task while the calling thread runs the other half; the halves meet
//! at a spinning [`Barrier`]. Work is divided so that every value is computed by exactly one
//! thread with the same operations as in a single-threaded run, so the results do not
//! depend on whether the worker took part. On wasm32 (no threads), on one-core machines, or
//! while another pass holds the worker, the task runs alone.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A task run as `task(thread, threads, barrier)`, `thread` in `0..threads`.
pub(crate) type Task<'a> = &'a (dyn Fn(usize, usize, &Barrier) + Sync);

/// How many tasks ran on two threads (tests check that the split path runs).
#[cfg(test)]
pub(crate) static SPLIT_RUNS: AtomicUsize = AtomicUsize::new(0);

/// A reusable spinning barrier for the threads of one task.
pub(crate) struct Barrier {
    threads: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    poisoned: AtomicBool,
}

impl Barrier {
    pub(crate) fn new(threads: usize) -> Barrier {
        Barrier {
            threads,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
        }
    }

    /// Waits until every thread of the task has arrived. Panics if another thread panicked.
    pub(crate) fn wait(&self) {
        if self.threads == 1 {
            return;
        }
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.threads {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if self.poisoned.load(Ordering::Relaxed) {
                panic!("another thread of the forward pass panicked");
            }
            backoff(&mut spins);
        }
    }

    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    fn poison(&self) {
        self.poisoned.store(true, Ordering::Relaxed);
    }
}

/// Spins a while, then yields the core (the machine may be busy with other work).
fn backoff(spins: &mut u32) {
    if *spins < 4096 {
        *spins += 1;
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Runs `task` on two threads when the worker is free, else alone.
#[cfg(target_arch = "wasm32")]
pub(crate) fn run(task: Task<'_>) {
    task(0, 1, &Barrier::new(1));
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) use native::run;

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Condvar, Mutex, OnceLock};

    use super::{backoff, Barrier, Task};

    /// What the worker is handed: pointers into the caller's frame, which stays alive (and
    /// waits) until the worker sets `done`.
    struct Job {
        task: *const (dyn Fn(usize, usize, &Barrier) + Sync),
        barrier: *const Barrier,
        done: *const AtomicBool,
    }

    // SAFETY: the pointees are `Sync` and outlive the job (see `Job`).
    unsafe impl Send for Job {}

    struct Pool {
        slot: Mutex<Option<Job>>,
        wake: Condvar,
        /// Held by the pass that is using the worker.
        busy: AtomicBool,
    }

    fn pool() -> Option<&'static Pool> {
        static POOL: OnceLock<Option<&'static Pool>> = OnceLock::new();
        *POOL.get_or_init(|| {
            if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
                return None;
            }
            let pool: &'static Pool = Box::leak(Box::new(Pool {
                slot: Mutex::new(None),
                wake: Condvar::new(),
                busy: AtomicBool::new(false),
            }));
            std::thread::Builder::new()
                .name("model-worker".into())
                .spawn(move || worker(pool))
                .ok()?;
            Some(pool)
        })
    }

    fn worker(pool: &'static Pool) {
        loop {
            let job = {
                let mut slot = pool.slot.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if let Some(job) = slot.take() {
                        break job;
                    }
                    slot = pool.wake.wait(slot).unwrap_or_else(|e| e.into_inner());
                }
            };
            // SAFETY: the caller keeps all three alive until `done` is set, below.
            let (task, barrier, done) = unsafe { (&*job.task, &*job.barrier, &*job.done) };
            if catch_unwind(AssertUnwindSafe(|| task(1, 2, barrier))).is_err() {
                barrier.poison();
            }
            done.store(true, Ordering::Release);
        }
    }

    pub(crate) fn run(task: Task<'_>) {
        let Some(pool) = pool() else {
            return task(0, 1, &Barrier::new(1));
        };
        if pool.busy.swap(true, Ordering::Acquire) {
            return task(0, 1, &Barrier::new(1));
        }
        #[cfg(test)]
        super::SPLIT_RUNS.fetch_add(1, Ordering::Relaxed);
        let barrier = Barrier::new(2);
        let done = AtomicBool::new(false);
        // SAFETY: only the lifetime is erased; this function does not return (nor unwind)
        // before the worker has set `done`, after its last use of the task.
        let erased: Task<'static> = unsafe { std::mem::transmute::<Task<'_>, Task<'static>>(task) };
        *pool.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(Job {
            task: erased,
            barrier: &barrier,
            done: &done,
        });
        pool.wake.notify_one();
        let result = catch_unwind(AssertUnwindSafe(|| task(0, 2, &barrier)));
        if result.is_err() {
            barrier.poison();
        }
        let mut spins = 0;
        while !done.load(Ordering::Acquire) {
            backoff(&mut spins);
        }
        pool.busy.store(false, Ordering::Release);
        match result {
            Err(panic) => resume_unwind(panic),
            Ok(()) if barrier.poisoned.load(Ordering::Relaxed) => {
                panic!("the forward pass's worker thread panicked")
            }
            Ok(()) => {}
        }
    }
}

//! The engine's pool: a bounded number of estimates run at once on the
//! blocking threads, a bounded number wait for a worker, and each request has
//! a deadline. A request beyond the queue is refused at once, so a burst or a
//! few huge requests cost a bounded amount of memory and never a long wait.
//!
//! The engine cannot be stopped half-way: work past its deadline is answered
//! 504 but runs on to its end, keeping its worker, so the bound on concurrent
//! work holds even then. Heavy work (whose cost grows with the input) may
//! hold all workers but one, so slow requests, however many, never keep the
//! light ones waiting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::time::timeout_at;

/// Work that ran this long has likely grown the heap by much: give the freed
/// memory back to the system afterwards instead of keeping it mapped.
const RELEASE_MEMORY_AFTER: Duration = Duration::from_millis(100);

/// Why the pool did not run a piece of work to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Every worker and every place in the queue was taken.
    Full,
    /// The deadline passed before a worker was free.
    Waited,
    /// The deadline passed while the work ran; it runs on, holding its worker.
    Overran,
    /// The work panicked (a bug, never bad input).
    Panicked,
}

/// How much a piece of work may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// Bounded by the catalogues (a preset, a flat parameter count).
    Light,
    /// Growing with the input (a pasted config.json of any size).
    Heavy,
}

/// Workers, queue and deadline.
#[derive(Debug)]
pub struct Pool {
    /// One permit per worker.
    running: Arc<Semaphore>,
    /// One permit per worker that heavy work may hold: all but one.
    heavy: Arc<Semaphore>,
    /// One permit per request running or waiting.
    admitted: Arc<Semaphore>,
    deadline: Duration,
}

impl Pool {
    /// `workers` pieces of work at once, `queue` more waiting, each answered
    /// within `deadline` of its arrival.
    pub fn new(workers: usize, queue: usize, deadline: Duration) -> Pool {
        let workers = workers.max(1);
        Pool {
            running: Arc::new(Semaphore::new(workers)),
            heavy: Arc::new(Semaphore::new(workers.saturating_sub(1).max(1))),
            admitted: Arc::new(Semaphore::new(workers.saturating_add(queue))),
            deadline,
        }
    }

    /// The deadline of each piece of work.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Runs `work` on a blocking thread when a worker is free; its result, or
    /// why there is none.
    pub async fn run<T: Send + 'static>(
        &self,
        weight: Weight,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Refusal> {
        let admitted = Arc::clone(&self.admitted)
            .try_acquire_owned()
            .map_err(|_| Refusal::Full)?;
        let deadline = tokio::time::Instant::now() + self.deadline;
        let places = async {
            let heavy = match weight {
                Weight::Light => None,
                Weight::Heavy => Some(Arc::clone(&self.heavy).acquire_owned().await?),
            };
            let worker = Arc::clone(&self.running).acquire_owned().await?;
            Ok::<_, tokio::sync::AcquireError>((heavy, worker))
        };
        let places = match timeout_at(deadline, places).await {
            Ok(Ok(places)) => places,
            // The semaphores are never closed.
            Ok(Err(_)) => return Err(Refusal::Full),
            Err(_) => return Err(Refusal::Waited),
        };
        let running = tokio::task::spawn_blocking(move || {
            // The places are given back when the work ends, even past its
            // deadline, even by a panic.
            let _places = (admitted, places);
            let started = Instant::now();
            let result = work();
            if started.elapsed() >= RELEASE_MEMORY_AFTER {
                release_memory();
            }
            result
        });
        match timeout_at(deadline, running).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(_)) => Err(Refusal::Panicked),
            Err(_) => Err(Refusal::Overran),
        }
    }
}

/// Returns freed heap memory to the system. glibc keeps what a thread freed
/// in that thread's arena, so after a large request the server's resident
/// memory would stay at its peak.
fn release_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and shrinks the allocator's own free
    // lists; it takes the allocator's locks and is safe to call at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    // The pool's deadline is a time by design, so these tests sleep; but
    // none compares how long something took with a constant (a loaded
    // machine or a debug build would fail it): an answer that must come
    // "at once" or "before the slow work" is checked against a flag that
    // the slow work sets when it ends.

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    /// Sleeps `ms`, then raises a flag: whether the slow work has ended.
    fn sleep_then_raise(ms: u64) -> (Arc<AtomicBool>, impl FnOnce() -> u64 + Send + 'static) {
        let ended = Arc::new(AtomicBool::new(false));
        let raise = Arc::clone(&ended);
        let work = move || {
            std::thread::sleep(Duration::from_millis(ms));
            raise.store(true, Ordering::SeqCst);
            ms
        };
        (ended, work)
    }

    #[test]
    fn work_runs_and_returns() {
        runtime().block_on(async {
            let pool = Pool::new(1, 0, Duration::from_secs(5));
            assert_eq!(pool.run(Weight::Light, || 7).await, Ok(7));
            assert_eq!(pool.run(Weight::Light, || 8).await, Ok(8));
        });
    }

    #[test]
    fn work_past_its_deadline_is_answered_at_the_deadline_and_keeps_its_worker() {
        runtime().block_on(async {
            let pool = Arc::new(Pool::new(1, 1, Duration::from_millis(200)));
            let (ended, work) = sleep_then_raise(1_000);
            assert_eq!(pool.run(Weight::Light, work).await, Err(Refusal::Overran));
            // Answered at the deadline, not when the work ended.
            assert!(!ended.load(Ordering::SeqCst));
            // The overrunning work still holds the only worker.
            assert_eq!(pool.run(Weight::Light, || 1).await, Err(Refusal::Waited));
            tokio::time::sleep(Duration::from_millis(900)).await;
            assert_eq!(pool.run(Weight::Light, || 2).await, Ok(2));
        });
    }

    #[test]
    fn a_full_queue_is_refused_at_once() {
        runtime().block_on(async {
            let pool = Arc::new(Pool::new(1, 1, Duration::from_secs(2)));
            let (ended, work) = sleep_then_raise(400);
            let running = tokio::spawn({
                let pool = Arc::clone(&pool);
                async move { pool.run(Weight::Light, work).await }
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
            let waiting = tokio::spawn({
                let pool = Arc::clone(&pool);
                async move { pool.run(Weight::Light, || 0).await }
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(pool.run(Weight::Light, || 1).await, Err(Refusal::Full));
            // Refused at once: not after the running work freed its worker.
            assert!(!ended.load(Ordering::SeqCst));
            assert_eq!(running.await.unwrap(), Ok(400));
            assert_eq!(waiting.await.unwrap(), Ok(0));
        });
    }

    #[test]
    fn one_slow_piece_of_work_does_not_hold_up_the_others() {
        runtime().block_on(async {
            let pool = Arc::new(Pool::new(2, 8, Duration::from_secs(2)));
            let (ended, work) = sleep_then_raise(1_500);
            let slow = tokio::spawn({
                let pool = Arc::clone(&pool);
                async move { pool.run(Weight::Light, work).await }
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
            for n in 0..20 {
                assert_eq!(pool.run(Weight::Light, move || n).await, Ok(n));
            }
            // All twenty answered while the slow work still ran.
            assert!(!ended.load(Ordering::SeqCst));
            assert_eq!(slow.await.unwrap(), Ok(1_500));
        });
    }

    #[test]
    fn heavy_work_always_leaves_a_worker_to_light_work() {
        runtime().block_on(async {
            let pool = Arc::new(Pool::new(2, 8, Duration::from_millis(500)));
            let (ended, heavy): (Vec<_>, Vec<_>) = (0..2)
                .map(|_| {
                    let pool = Arc::clone(&pool);
                    let (ended, work) = sleep_then_raise(1_000);
                    let task = tokio::spawn(async move { pool.run(Weight::Heavy, work).await });
                    (ended, task)
                })
                .unzip();
            tokio::time::sleep(Duration::from_millis(50)).await;
            for n in 0..20 {
                assert_eq!(pool.run(Weight::Light, move || n).await, Ok(n));
            }
            // Answered while the heavy work held its worker, not after.
            assert!(ended.iter().all(|ended| !ended.load(Ordering::SeqCst)));
            let mut outcomes = Vec::new();
            for task in heavy {
                outcomes.push(task.await.unwrap());
            }
            outcomes.sort_by_key(|outcome| format!("{outcome:?}"));
            assert_eq!(outcomes, [Err(Refusal::Overran), Err(Refusal::Waited)]);
        });
    }

    #[test]
    fn no_more_than_the_workers_run_at_once() {
        runtime().block_on(async {
            let pool = Arc::new(Pool::new(2, 16, Duration::from_secs(5)));
            let now = Arc::new(AtomicUsize::new(0));
            let most = Arc::new(AtomicUsize::new(0));
            let tasks: Vec<_> = (0..12)
                .map(|_| {
                    let (pool, now, most) =
                        (Arc::clone(&pool), Arc::clone(&now), Arc::clone(&most));
                    tokio::spawn(async move {
                        pool.run(Weight::Light, move || {
                            let running = now.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(running, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(20));
                            now.fetch_sub(1, Ordering::SeqCst);
                        })
                        .await
                    })
                })
                .collect();
            for task in tasks {
                assert_eq!(task.await.unwrap(), Ok(()));
            }
            assert_eq!(most.load(Ordering::SeqCst), 2);
        });
    }

    #[test]
    fn a_panic_is_reported_and_gives_its_worker_back() {
        runtime().block_on(async {
            let pool = Pool::new(1, 0, Duration::from_secs(2));
            assert_eq!(
                pool.run(Weight::Light, || -> u8 { panic!("a bug") }).await,
                Err(Refusal::Panicked)
            );
            assert_eq!(pool.run(Weight::Light, || 3).await, Ok(3));
        });
    }
}

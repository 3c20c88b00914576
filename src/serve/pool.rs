//! The engine's pool: a bounded number of estimates run at once on the
//! blocking threads, a bounded number wait for a worker, and each piece of
//! work has a deadline from its start. A request beyond its queue is refused
//! at once, so a burst or a few huge requests cost a bounded amount of
//! memory and never a long wait.
//!
//! Heavy work (whose cost grows with the input) has its own small queue and
//! may hold all workers but one, so slow requests, however many, never keep
//! the light ones waiting or take their places in the queue. Work answered
//! at its deadline, or whose client left, is told to stop ([`Cancel`]): the
//! engine's long loops ask between estimates, so it gives its worker back
//! within one estimate instead of running on to its end.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// No worker was free within the deadline.
    Waited,
    /// The work ran past its deadline; it was told to stop.
    Overran,
    /// The work panicked (a bug, never bad input).
    Panicked,
}

/// How much a piece of work may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// Bounded by the catalogues (a preset, a flat parameter count).
    Light,
    /// Growing with the input (a pasted config.json of any size, the
    /// techniques' ladder of estimates).
    Heavy,
}

/// Whether a piece of work's answer is still wanted: set once its request
/// was answered without it (the deadline passed) or its client left. Work
/// that loops over estimates asks between them and stops.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// Whether the work should stop.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Sets its [`Cancel`] when dropped: when [`Pool::run`] returns, or when its
/// future is dropped because the client went away.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// A request's place in its queue, from [`Pool::admit`]; given back when
/// dropped, or when its work ends.
#[derive(Debug)]
pub struct Admitted {
    weight: Weight,
    permit: tokio::sync::OwnedSemaphorePermit,
}

/// Workers, queues and deadline.
#[derive(Debug)]
pub struct Pool {
    /// One permit per worker.
    running: Arc<Semaphore>,
    /// One permit per worker that heavy work may hold: all but one.
    heavy: Arc<Semaphore>,
    /// One permit per light request running or waiting.
    light_admitted: Arc<Semaphore>,
    /// One permit per heavy request running or waiting.
    heavy_admitted: Arc<Semaphore>,
    deadline: Duration,
}

impl Pool {
    /// `workers` pieces of work at once, `queue` more light and `heavy_queue`
    /// more heavy ones waiting (each at most `deadline` for a worker), each
    /// answered within `deadline` of its start.
    pub fn new(workers: usize, queue: usize, heavy_queue: usize, deadline: Duration) -> Pool {
        let workers = workers.max(1);
        let heavy_workers = workers.saturating_sub(1).max(1);
        Pool {
            running: Arc::new(Semaphore::new(workers)),
            heavy: Arc::new(Semaphore::new(heavy_workers)),
            light_admitted: Arc::new(Semaphore::new(workers.saturating_add(queue))),
            heavy_admitted: Arc::new(Semaphore::new(heavy_workers.saturating_add(heavy_queue))),
            deadline,
        }
    }

    /// The deadline of each piece of work.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Runs `work` on a blocking thread when a worker is free; its result, or
    /// why there is none. `work` is given the [`Cancel`] it should ask
    /// between long steps.
    pub async fn run<T: Send + 'static>(
        &self,
        weight: Weight,
        work: impl FnOnce(&Cancel) -> T + Send + 'static,
    ) -> Result<T, Refusal> {
        self.run_admitted(self.admit(weight)?, work).await
    }

    /// A place in the queue of `weight`, or [`Refusal::Full`] at once: taken
    /// before a request is read, so that a flood of heavy requests is shed
    /// for the cost of its HTTP alone.
    pub fn admit(&self, weight: Weight) -> Result<Admitted, Refusal> {
        let admitted = match weight {
            Weight::Light => &self.light_admitted,
            Weight::Heavy => &self.heavy_admitted,
        };
        let permit = Arc::clone(admitted)
            .try_acquire_owned()
            .map_err(|_| Refusal::Full)?;
        Ok(Admitted { weight, permit })
    }

    /// [`Pool::run`] with the place [`Pool::admit`] gave.
    pub async fn run_admitted<T: Send + 'static>(
        &self,
        admitted: Admitted,
        work: impl FnOnce(&Cancel) -> T + Send + 'static,
    ) -> Result<T, Refusal> {
        let Admitted {
            weight,
            permit: admitted,
        } = admitted;
        let waited_until = tokio::time::Instant::now() + self.deadline;
        let places = async {
            let heavy = match weight {
                Weight::Light => None,
                Weight::Heavy => Some(Arc::clone(&self.heavy).acquire_owned().await?),
            };
            let worker = Arc::clone(&self.running).acquire_owned().await?;
            Ok::<_, tokio::sync::AcquireError>((heavy, worker))
        };
        let places = match timeout_at(waited_until, places).await {
            Ok(Ok(places)) => places,
            // The semaphores are never closed.
            Ok(Err(_)) => return Err(Refusal::Full),
            Err(_) => return Err(Refusal::Waited),
        };
        // The work's own time starts now, not at its arrival.
        let deadline = tokio::time::Instant::now() + self.deadline;
        let cancel = Cancel::default();
        let _cancel_when_answered = CancelOnDrop(cancel.clone());
        let running = tokio::task::spawn_blocking(move || {
            // The places are given back when the work ends, even past its
            // deadline, even by a panic.
            let _places = (admitted, places);
            let started = Instant::now();
            let result = work(&cancel);
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
    use std::sync::atomic::AtomicUsize;

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

    fn sleep(ms: u64) -> impl FnOnce(&Cancel) -> u64 + Send + 'static {
        move |_| {
            std::thread::sleep(Duration::from_millis(ms));
            ms
        }
    }

    /// Sleeps `ms`, then raises a flag: whether the slow work has ended.
    fn sleep_then_raise(
        ms: u64,
    ) -> (
        Arc<AtomicBool>,
        impl FnOnce(&Cancel) -> u64 + Send + 'static,
    ) {
        let ended = Arc::new(AtomicBool::new(false));
        let raise = Arc::clone(&ended);
        let work = move |_: &Cancel| {
            std::thread::sleep(Duration::from_millis(ms));
            raise.store(true, Ordering::SeqCst);
            ms
        };
        (ended, work)
    }

    #[test]
    fn work_runs_and_returns() {
        runtime().block_on(async {
            let pool = Pool::new(1, 0, 0, Duration::from_secs(5));
            assert_eq!(pool.run(Weight::Light, |_| 7).await, Ok(7));
            assert_eq!(pool.run(Weight::Light, |_| 8).await, Ok(8));
        });
    }

    #[test]
    fn work_past_its_deadline_is_answered_at_the_deadline_and_keeps_its_worker() {
        runtime().block_on(async {
            let pool = Arc::new(Pool::new(1, 1, 1, Duration::from_millis(200)));
            let (ended, work) = sleep_then_raise(1_000);
            assert_eq!(pool.run(Weight::Light, work).await, Err(Refusal::Overran));
            // Answered at the deadline, not when the work ended.
            assert!(!ended.load(Ordering::SeqCst));
            // The overrunning work still holds the only worker.
            assert_eq!(pool.run(Weight::Light, |_| 1).await, Err(Refusal::Waited));
            tokio::time::sleep(Duration::from_millis(900)).await;
            assert_eq!(pool.run(Weight::Light, |_| 2).await, Ok(2));
        });
    }

    #[test]
    fn a_full_queue_is_refused_at_once() {
        runtime().block_on(async {
            let pool = Arc::new(Pool::new(1, 1, 1, Duration::from_secs(2)));
            let (ended, work) = sleep_then_raise(400);
            let running = tokio::spawn({
                let pool = Arc::clone(&pool);
                async move { pool.run(Weight::Light, work).await }
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
            let waiting = tokio::spawn({
                let pool = Arc::clone(&pool);
                async move { pool.run(Weight::Light, |_| 0).await }
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(pool.run(Weight::Light, |_| 1).await, Err(Refusal::Full));
            // Refused at once: not after the running work freed its worker.
            assert!(!ended.load(Ordering::SeqCst));
            assert_eq!(running.await.unwrap(), Ok(400));
            assert_eq!(waiting.await.unwrap(), Ok(0));
        });
    }

    #[test]
    fn one_slow_piece_of_work_does_not_hold_up_the_others() {
        runtime().block_on(async {
            let pool = Arc::new(Pool::new(2, 8, 8, Duration::from_secs(2)));
            let (ended, work) = sleep_then_raise(1_500);
            let slow = tokio::spawn({
                let pool = Arc::clone(&pool);
                async move { pool.run(Weight::Light, work).await }
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
            for n in 0..20 {
                assert_eq!(pool.run(Weight::Light, move |_| n).await, Ok(n));
            }
            // All twenty answered while the slow work still ran.
            assert!(!ended.load(Ordering::SeqCst));
            assert_eq!(slow.await.unwrap(), Ok(1_500));
        });
    }

    #[test]
    fn heavy_work_always_leaves_a_worker_to_light_work() {
        runtime().block_on(async {
            let pool = Arc::new(Pool::new(2, 8, 8, Duration::from_millis(500)));
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
                assert_eq!(pool.run(Weight::Light, move |_| n).await, Ok(n));
            }
            // All twenty answered while both heavy pieces still ran.
            assert!(ended.iter().all(|e| !e.load(Ordering::SeqCst)));
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
            let pool = Arc::new(Pool::new(2, 16, 16, Duration::from_secs(5)));
            let now = Arc::new(AtomicUsize::new(0));
            let most = Arc::new(AtomicUsize::new(0));
            let tasks: Vec<_> = (0..12)
                .map(|_| {
                    let (pool, now, most) =
                        (Arc::clone(&pool), Arc::clone(&now), Arc::clone(&most));
                    tokio::spawn(async move {
                        pool.run(Weight::Light, move |_| {
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
            let pool = Pool::new(1, 0, 0, Duration::from_secs(2));
            assert_eq!(
                pool.run(Weight::Light, |_| -> u8 { panic!("a bug") }).await,
                Err(Refusal::Panicked)
            );
            assert_eq!(pool.run(Weight::Light, |_| 3).await, Ok(3));
        });
    }

    /// Work that asks `cancel` every 10 ms until told to stop; `steps`
    /// counts its steps, `ended` is set when it returns.
    fn until_cancelled(
        steps: &Arc<AtomicUsize>,
        ended: &Arc<AtomicBool>,
    ) -> impl FnOnce(&Cancel) -> usize + Send + 'static {
        let (steps, ended) = (Arc::clone(steps), Arc::clone(ended));
        move |cancel| {
            while !cancel.is_set() {
                steps.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(10));
            }
            ended.store(true, Ordering::SeqCst);
            steps.load(Ordering::SeqCst)
        }
    }

    /// Waits (at most 5 s) for `ended`.
    async fn wait_for(ended: &AtomicBool) -> bool {
        for _ in 0..500 {
            if ended.load(Ordering::SeqCst) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[test]
    fn the_deadline_counts_from_the_start_of_the_work_not_its_arrival() {
        runtime().block_on(async {
            let pool = Arc::new(Pool::new(1, 1, 1, Duration::from_millis(1_000)));
            let first = tokio::spawn({
                let pool = Arc::clone(&pool);
                async move { pool.run(Weight::Light, sleep(700)).await }
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
            // Waits 700 ms for the worker, then runs 700 ms: 1.4 s after its
            // arrival, well within the second its work is allowed.
            assert_eq!(pool.run(Weight::Light, sleep(700)).await, Ok(700));
            assert_eq!(first.await.unwrap(), Ok(700));
        });
    }

    #[test]
    fn work_past_its_deadline_is_told_to_stop_and_gives_its_worker_back() {
        runtime().block_on(async {
            let pool = Pool::new(1, 0, 0, Duration::from_millis(100));
            let steps = Arc::new(AtomicUsize::new(0));
            let ended = Arc::new(AtomicBool::new(false));
            let overran = pool
                .run(Weight::Heavy, until_cancelled(&steps, &ended))
                .await;
            assert_eq!(overran, Err(Refusal::Overran));
            assert!(wait_for(&ended).await, "the work ran on after its 504");
            let stopped_at = steps.load(Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(steps.load(Ordering::SeqCst), stopped_at);
            // Its worker is free again.
            assert_eq!(pool.run(Weight::Heavy, |_| 4).await, Ok(4));
        });
    }

    #[test]
    fn work_whose_client_left_is_told_to_stop() {
        runtime().block_on(async {
            let pool = Arc::new(Pool::new(1, 0, 0, Duration::from_secs(60)));
            let steps = Arc::new(AtomicUsize::new(0));
            let ended = Arc::new(AtomicBool::new(false));
            let waiting = tokio::spawn({
                let (pool, work) = (Arc::clone(&pool), until_cancelled(&steps, &ended));
                async move { pool.run(Weight::Heavy, work).await }
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(steps.load(Ordering::SeqCst) > 0, "the work started");
            // The connection closed: hyper drops the request's future.
            waiting.abort();
            assert!(wait_for(&ended).await, "the work ran on for no one");
        });
    }

    #[test]
    fn heavy_requests_wait_in_their_own_queue() {
        runtime().block_on(async {
            // Two workers (one for heavy work), one light and one heavy place
            // in the queues.
            let pool = Arc::new(Pool::new(2, 1, 1, Duration::from_secs(5)));
            let heavy: Vec<_> = (0..2)
                .map(|_| {
                    let pool = Arc::clone(&pool);
                    tokio::spawn(async move { pool.run(Weight::Heavy, sleep(500)).await })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(50)).await;
            // One heavy runs and one waits: a third is refused at once...
            assert_eq!(pool.run(Weight::Heavy, |_| 0).await, Err(Refusal::Full));
            // ...while light work has its worker and its own queue.
            let light: Vec<_> = (0..2)
                .map(|n| {
                    let pool = Arc::clone(&pool);
                    tokio::spawn(async move { pool.run(Weight::Light, sleep(n * 50)).await })
                })
                .collect();
            for (n, task) in (0..).zip(light) {
                assert_eq!(task.await.unwrap(), Ok(n * 50));
            }
            for task in heavy {
                assert_eq!(task.await.unwrap(), Ok(500));
            }
        });
    }
}

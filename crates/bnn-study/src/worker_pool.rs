//! The studies' worker threads: independent jobs (a chain each) over a few threads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Result};

/// Runs `job` on every element of `jobs`, `workers` threads at a time (default: all cores), and
/// returns the results in the order of `jobs` whichever thread finished first. Once `stop` is set
/// no new job starts and the call fails with "interrupted; nothing written"; the first failed
/// job's error is returned otherwise.
pub(crate) fn run_jobs<J: Sync, T: Send>(
    jobs: &[J],
    workers: Option<usize>,
    stop: &AtomicBool,
    job: impl Fn(&J) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let workers = workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, jobs.len().max(1));
    let queue = Mutex::new(jobs.iter().enumerate());
    let results: Mutex<Vec<(usize, Result<T>)>> = Mutex::new(Vec::with_capacity(jobs.len()));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).next();
                let Some((index, item)) = next else { break };
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let result = job(item);
                results
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((index, result));
            });
        }
    });
    if stop.load(Ordering::Relaxed) {
        bail!("interrupted; nothing written");
    }
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, result)| result).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_job_order_and_errors_and_stops_are_reported() {
        let stop = AtomicBool::new(false);
        let squares = run_jobs(&[3, 1, 4, 1, 5, 9, 2, 6], Some(3), &stop, |&x| Ok(x * x)).unwrap();
        assert_eq!(squares, [9, 1, 16, 1, 25, 81, 4, 36]);
        let failed = run_jobs(&[1, 2, 3], Some(2), &stop, |&x| {
            if x == 2 {
                bail!("job {x} failed")
            } else {
                Ok(x)
            }
        });
        assert_eq!(failed.unwrap_err().to_string(), "job 2 failed");
        stop.store(true, Ordering::Relaxed);
        assert!(run_jobs(&[1], None, &stop, |&x| Ok(x))
            .unwrap_err()
            .to_string()
            .contains("interrupted"));
    }
}

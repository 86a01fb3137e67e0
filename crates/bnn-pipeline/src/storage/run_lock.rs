//! One writer at a time per run directory, and no reader beside a writer.
//!
//! A run directory is a small database, locked the way SQLite locks its file: an advisory
//! `flock(2)` on `DIR/.lock`, exclusive for a process that writes (train, sample, resume, merge)
//! and shared for one that reads (predict, evaluate, diagnose, plot). The OS drops the lock when
//! its process ends however it ends (`kill -9` included), so a dead holder never blocks the next
//! command; nothing has to be cleaned up by hand. While it holds the lock a writer records itself
//! in the file (pid, host, start time, command line), so a refused command can say who holds it.
//!
//! Locks are per process and re-entrant: `bnn run` locks its directory once for writing, and the
//! prediction and diagnostics it runs at the end read under that same lock.

use anyhow::{bail, Context as _, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

/// The lock file inside a run directory.
pub const LOCK_FILE: &str = ".lock";

/// What a process does with a run directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Reads files; any number of readers at once, never beside a writer.
    Read,
    /// Writes files; alone.
    Write,
}

/// Who holds a directory's write lock, as the holder recorded it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LockHolder {
    pub pid: u32,
    pub host: String,
    /// Seconds since the Unix epoch.
    pub started: u64,
    pub command: String,
}

impl LockHolder {
    fn this_process() -> Self {
        Self {
            pid: std::process::id(),
            host: crate::cluster::shard::host_name(),
            started: crate::cluster::shard::unix_now(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
        }
    }

    fn describe(&self) -> String {
        format!(
            "pid {} on host {}, since {} (`{}`)",
            self.pid,
            self.host,
            utc_text(self.started),
            self.command
        )
    }
}

struct Held {
    file: File,
    access: Mutex<Access>,
}

/// A held lock on one run directory; dropping the last handle of a process releases it.
#[derive(Clone)]
pub struct RunLock {
    held: Arc<Held>,
    dir: PathBuf,
}

impl std::fmt::Debug for RunLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RunLock({})", self.dir.display())
    }
}

/// The locks this process holds, by directory, so a second request shares the first.
fn held_here() -> &'static Mutex<HashMap<PathBuf, Weak<Held>>> {
    static HELD: std::sync::OnceLock<Mutex<HashMap<PathBuf, Weak<Held>>>> =
        std::sync::OnceLock::new();
    HELD.get_or_init(Default::default)
}

impl RunLock {
    /// Locks `dir` for `access` without waiting; a conflicting holder is refused with the
    /// directory and, for a writer, who it is. Writing creates `dir` if it is missing.
    pub fn acquire(dir: &Path, access: Access) -> Result<RunLock> {
        match access {
            Access::Write => std::fs::create_dir_all(dir)
                .with_context(|| format!("creating {}", dir.display()))?,
            Access::Read => {
                if let Err(e) = std::fs::metadata(dir) {
                    return Err(e).with_context(|| format!("reading {}", dir.display()));
                }
            }
        }
        let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let mut registry = held_here().lock().unwrap_or_else(|e| e.into_inner());
        registry.retain(|_, held| held.strong_count() > 0);
        if let Some(held) = registry.get(&key).and_then(Weak::upgrade) {
            let mut current = held.access.lock().unwrap_or_else(|e| e.into_inner());
            if *current < access {
                try_flock(&held.file, dir, access)?;
                *current = access;
                record_holder(&held.file, dir)?;
            }
            drop(current);
            return Ok(RunLock {
                held,
                dir: dir.to_path_buf(),
            });
        }
        let path = dir.join(LOCK_FILE);
        let create = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path);
        let file = match (access, create) {
            (_, Ok(file)) => file,
            (Access::Write, Err(e)) => {
                return Err(e).with_context(|| format!("opening {}", path.display()))
            }
            // A directory the reader may not write (another user's run): read-only, and where
            // no writer ever made a lock file there is none to share.
            (Access::Read, Err(_)) if path.exists() => {
                File::open(&path).with_context(|| format!("opening {}", path.display()))?
            }
            (Access::Read, Err(_)) => {
                File::open(dir).with_context(|| format!("opening {}", dir.display()))?
            }
        };
        try_flock(&file, dir, access)?;
        if access == Access::Write {
            record_holder(&file, dir)?;
        }
        let held = Arc::new(Held {
            file,
            access: Mutex::new(access),
        });
        registry.insert(key, Arc::downgrade(&held));
        Ok(RunLock {
            held,
            dir: dir.to_path_buf(),
        })
    }

    pub fn access(&self) -> Access {
        *self.held.access.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Takes the OS lock on `file` for `access` without waiting, or says who holds it.
fn try_flock(file: &File, dir: &Path, access: Access) -> Result<()> {
    let taken = match access {
        Access::Write => file.try_lock(),
        Access::Read => file.try_lock_shared(),
    };
    match taken {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => {
            // A holder that has just taken the lock may still be writing its record.
            let mut holder = read_holder(dir);
            for _ in 0..20 {
                if holder.is_some() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
                holder = read_holder(dir);
            }
            let who = match &holder {
                Some(holder) => format!("bnn {}", holder.describe()),
                None => "another bnn process".to_string(),
            };
            match access {
                Access::Write => bail!(
                    "{} is in use by {who}; one process writes a run directory at a time. Wait for it to finish, or stop it (Ctrl-C or SIGTERM checkpoints every chain), then run this again",
                    dir.display()
                ),
                Access::Read => bail!(
                    "{} is being written by {who}; its files are read once the writer has finished or stopped (Ctrl-C or SIGTERM checkpoints every chain)",
                    dir.display()
                ),
            }
        }
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", dir.join(LOCK_FILE).display()))
        }
    }
}

/// Writes this process as the holder into the (locked) lock file.
fn record_holder(mut file: &File, dir: &Path) -> Result<()> {
    let text = serde_json::to_string(&LockHolder::this_process())? + "\n";
    let path = dir.join(LOCK_FILE);
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(text.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))
}

/// The holder a lock file records (a holder that is still writing it reads as `None`).
pub fn read_holder(dir: &Path) -> Option<LockHolder> {
    let mut text = String::new();
    File::open(dir.join(LOCK_FILE))
        .ok()?
        .read_to_string(&mut text)
        .ok()?;
    serde_json::from_str(text.trim()).ok()
}

/// `2026-12-07 21:04:05 UTC` from seconds since the Unix epoch (proleptic Gregorian calendar).
pub fn utc_text(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rest = seconds % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_text_reads_as_a_calendar_date() {
        assert_eq!(utc_text(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_text(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_text(1_796_677_445), "2026-12-07 21:04:05 UTC");
    }

    #[test]
    fn a_process_shares_its_own_lock_and_upgrades_it() {
        let dir = tempfile::tempdir().unwrap();
        let read = RunLock::acquire(dir.path(), Access::Read).unwrap();
        assert_eq!(read.access(), Access::Read);
        std::fs::write(dir.path().join(LOCK_FILE), "").unwrap();
        drop(read);
        let write = RunLock::acquire(dir.path(), Access::Write).unwrap();
        let again = RunLock::acquire(dir.path(), Access::Read).unwrap();
        assert_eq!(again.access(), Access::Write);
        let holder = read_holder(dir.path()).unwrap();
        assert_eq!(holder.pid, std::process::id());
        drop((write, again));
        // Released: another handle (as another process would) takes it at once.
        let file = File::open(dir.path().join(LOCK_FILE)).unwrap();
        file.try_lock().unwrap();
    }

    #[test]
    fn a_second_open_file_is_refused_while_the_lock_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let _write = RunLock::acquire(dir.path(), Access::Write).unwrap();
        // Another open file description stands for another process.
        let other = File::open(dir.path().join(LOCK_FILE)).unwrap();
        let error = try_flock(&other, dir.path(), Access::Read).unwrap_err();
        let text = format!("{error:#}");
        assert!(text.contains("is being written by bnn pid"), "{text}");
        assert!(text.contains(&std::process::id().to_string()), "{text}");
        let error = try_flock(&other, dir.path(), Access::Write).unwrap_err();
        assert!(format!("{error:#}").contains("is in use by"), "{error:#}");
    }
}

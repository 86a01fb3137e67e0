//! A run directory behaves like a small database: one writer at a time (two writers, a writer
//! and a reader, a requeued shard while its old process lives, a lock left by `kill -9`), resume
//! that continues what was started or says there is nothing to resume, readers that check every
//! count and value, CSV data pinned by path and hash, and no predictions from a partial run.
//! Real processes and real files throughout.

#[path = "support/run_dirs.rs"]
mod run_dirs;

use run_dirs::{bnn, temp_dir};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

fn run(args: &[String]) -> Output {
    bnn().args(args).output().expect("bnn starts")
}

fn spawn(args: &[String]) -> Child {
    bnn()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bnn starts")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// Waits until `ready()` holds, at most `limit`.
fn wait_until(limit: Duration, ready: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn kill9(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `bnn train` of two small cos(2x) members into `out` (about a second).
fn trained(out: &Path) {
    let o = run(&strings(&[
        "train",
        "--dataset",
        "cos2x",
        "--hidden",
        "8",
        "--members",
        "2",
        "--epochs",
        "200",
        "--seed",
        "3",
        "--out",
        &path(out),
    ]));
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `bnn sample` into the trained directory `out` with `sampler`'s flags.
fn sample_into(out: &Path, sampler: &[&str], iterations: (&str, &str)) -> Vec<String> {
    let mut args = strings(&["sample", "--warmup", iterations.0, "--draws", iterations.1]);
    args.extend(strings(&["--threads", "1", "--out", &path(out)]));
    args.extend(strings(sampler));
    args
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The sampler that `config.toml` names and the one that wrote the draws (their statistics
/// columns: NUTS writes CmdStan's seven, MCLMC its own after them).
fn samplers_of(dir: &Path) -> (String, &'static str) {
    let config = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    let named = config
        .lines()
        .find_map(|l| l.strip_prefix("name = \""))
        .map(|l| l.trim_end_matches('"').to_string())
        .unwrap_or_default();
    let header = std::fs::read_to_string(dir.join("draws_chain_0.csv")).unwrap();
    let stats = header
        .lines()
        .next()
        .unwrap()
        .split(',')
        .filter(|c| c.ends_with("__"))
        .count();
    (named, if stats == 7 { "nuts" } else { "mclmc" })
}

/// Two `bnn sample` processes, NUTS and MCLMC, started together on copies of one trained
/// directory, 50 rounds: exactly one samples, the other is refused (naming the holder, or
/// because the draws are there), and what is left is one run whose config names the sampler
/// that wrote its draws.
#[test]
fn two_writers_on_one_directory_leave_one_consistent_run() {
    let root = temp_dir("db-writers");
    let base = root.join("trained");
    trained(&base);
    let mut holders_named = 0;
    for round in 0..50 {
        let dir = root.join(format!("round-{round}"));
        copy_dir(&base, &dir);
        let nuts = spawn(&sample_into(
            &dir,
            &["--sampler", "nuts", "--max-depth", "4"],
            ("20", "20"),
        ));
        // MCLMC keeps every tenth draw by default: 100 iterations keep 10.
        let mclmc = spawn(&sample_into(&dir, &["--sampler", "mclmc"], ("50", "100")));
        let outcomes = [
            nuts.wait_with_output().unwrap(),
            mclmc.wait_with_output().unwrap(),
        ];
        let won: Vec<bool> = outcomes.iter().map(|o| o.status.success()).collect();
        assert_eq!(
            won.iter().filter(|&&w| w).count(),
            1,
            "round {round}: {} / {}",
            stderr(&outcomes[0]),
            stderr(&outcomes[1])
        );
        let lost = stderr(&outcomes[usize::from(won[0])]);
        // Met at the lock, or came after the winner had finished.
        assert!(
            lost.contains("is in use by bnn pid")
                || lost.contains("already holds draws")
                || lost.contains("another configuration"),
            "round {round}: {lost}"
        );
        holders_named += usize::from(lost.contains("is in use by bnn pid"));
        assert!(!lost.contains("No such file"), "round {round}: {lost}");
        let (named, wrote) = samplers_of(&dir);
        assert_eq!(
            named, wrote,
            "round {round}: config.toml and draws disagree"
        );
        assert_eq!(
            wrote,
            if won[0] { "nuts" } else { "mclmc" },
            "round {round}"
        );
        let o = run(&strings(&["diagnose", &path(&dir)]));
        assert!(o.status.success(), "round {round}: {}", stderr(&o));
        let _ = std::fs::remove_dir_all(&dir);
    }
    // The two start together: most rounds meet at the lock rather than one after the other.
    assert!(
        holders_named >= 10,
        "only {holders_named} of 50 rounds met at the lock"
    );
}

/// A reader beside a writer is refused naming the writer; once the writer has stopped, the same
/// reader reads the last complete state and says the run is partial, and predictions are refused.
#[test]
fn a_reader_beside_a_writer_is_refused_and_a_stopped_run_reads_as_partial() {
    let root = temp_dir("db-reader");
    let dir = root.join("run");
    trained(&dir);
    let mut writer = spawn(&sample_into(
        &dir,
        &["--max-depth", "6", "--checkpoint-every", "5"],
        ("50", "4000"),
    ));
    // Until both chains have checkpointed some draws (past their warmup).
    let kept = |chain: usize| -> u64 {
        let path = dir.join("checkpoints").join(format!("chain_{chain}.json"));
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["kept_draws"].as_u64())
            .unwrap_or(0)
    };
    assert!(wait_until(Duration::from_secs(120), || kept(0) >= 10 && kept(1) >= 10));
    for reader in ["diagnose", "predict", "evaluate", "plot"] {
        let o = run(&strings(&[reader, &path(&dir)]));
        assert!(!o.status.success(), "{reader} read beside the writer");
        assert!(
            stderr(&o).contains("is being written by bnn pid")
                && stderr(&o).contains(&writer.id().to_string()),
            "{reader}: {}",
            stderr(&o)
        );
    }
    // A second writer (a requeued job while the old one is still alive) is refused at once.
    let again = run(&sample_into(&dir, &[], ("50", "4000")));
    assert!(
        stderr(&again).contains("is in use by bnn pid"),
        "{}",
        stderr(&again)
    );
    let resume = run(&strings(&["sample", "--resume", &path(&dir)]));
    assert!(
        stderr(&resume).contains("is in use by bnn pid"),
        "{}",
        stderr(&resume)
    );
    // SIGTERM: every chain checkpointed, exit 75.
    // SAFETY: kill(2) on the pid of a child we own.
    unsafe {
        libc::kill(writer.id() as libc::pid_t, libc::SIGTERM);
    }
    let stopped = writer.wait().unwrap();
    assert_eq!(stopped.code(), Some(75));
    let o = run(&strings(&["diagnose", &path(&dir)]));
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("has not finished sampling"), "{text}");
    for reader in ["predict", "evaluate"] {
        let o = run(&strings(&[reader, &path(&dir)]));
        assert!(!o.status.success(), "{reader} accepted a partial run");
        assert!(
            stderr(&o).contains("has not finished sampling"),
            "{}",
            stderr(&o)
        );
    }
    assert!(!dir.join("predictions.csv").exists());
}

/// `kill -9` leaves the lock file behind, but not the lock: the resume takes it at once, and the
/// run continued from a kill before its first checkpoint is the sampler that was started.
#[test]
fn a_lock_left_by_kill_9_does_not_block_and_resume_continues_what_was_started() {
    let root = temp_dir("db-stale");
    let reference = root.join("reference");
    let dir = root.join("killed");
    trained(&reference);
    copy_dir(&reference, &dir);
    // A second or two of MCLMC steps, none of them checkpointed before the end.
    let mclmc = [
        "--sampler",
        "mclmc",
        "--thin",
        "100",
        "--checkpoint-every",
        "10000000",
    ];
    let iterations = ("200", "200000");
    let o = run(&sample_into(&reference, &mclmc, iterations));
    assert!(o.status.success(), "{}", stderr(&o));
    let mut child = spawn(&sample_into(&dir, &mclmc, iterations));
    let journal = dir.join("journal.jsonl");
    assert!(wait_until(Duration::from_secs(60), || {
        std::fs::read_to_string(&journal).is_ok_and(|t| t.contains("sampling_started"))
    }));
    kill9(&mut child);
    assert!(dir.join(".lock").exists());
    assert!(!dir.join("checkpoints").join("chain_0.json").exists());
    let o = run(&strings(&["sample", "--resume", &path(&dir)]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(samplers_of(&dir), ("mclmc".to_string(), "mclmc"));
    for chain in 0..2 {
        let name = format!("draws_chain_{chain}.csv");
        assert!(
            std::fs::read(reference.join(&name)).unwrap()
                == std::fs::read(dir.join(&name)).unwrap(),
            "{name} differs from the uninterrupted run's"
        );
    }
}

/// `--resume` on a directory that holds only a trained ensemble has nothing to continue.
#[test]
fn resume_without_a_started_sampling_says_there_is_nothing_to_resume() {
    let root = temp_dir("db-nothing");
    let dir = root.join("rs");
    trained(&dir);
    let before = std::fs::read(dir.join("config.toml")).unwrap();
    let o = run(&strings(&["sample", "--resume", &path(&dir)]));
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!("nothing to resume in {}", dir.display())),
        "{}",
        stderr(&o)
    );
    assert!(!dir.join("draws_chain_0.csv").exists());
    assert_eq!(std::fs::read(dir.join("config.toml")).unwrap(), before);
    // The corrected command samples.
    let o = run(&sample_into(&dir, &["--max-depth", "4"], ("20", "20")));
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `bnn run` of a small DEI-MCMC (cos(2x), 2 members and chains, 30 + 40) into `dir`, with
/// `extra` flags after the others.
fn small_run(dir: &Path, extra: &[&str]) -> Output {
    let mut args = strings(&[
        "run",
        "--dataset",
        "cos2x",
        "--hidden",
        "8",
        "--members",
        "2",
        "--epochs",
        "200",
        "--warmup",
        "30",
        "--draws",
        "40",
        "--max-depth",
        "4",
        "--threads",
        "1",
    ]);
    args.extend(strings(extra));
    args.extend(["--out".to_string(), path(dir)]);
    run(&args)
}

/// A finished [`small_run`].
fn finished_run(dir: &Path) {
    let o = small_run(dir, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
}

fn readers_refuse(dir: &Path, expected: &[&str]) {
    for reader in ["diagnose", "predict", "evaluate"] {
        let o = run(&strings(&[reader, &path(dir)]));
        assert!(!o.status.success(), "{reader} accepted {}", dir.display());
        for text in expected {
            assert!(stderr(&o).contains(text), "{reader}: {}", stderr(&o));
        }
    }
}

/// Rows appended to a finished chain, a NaN cell and a deleted checkpoint: every reader refuses,
/// naming the file and what is wrong.
#[test]
fn readers_check_counts_both_ways_and_refuse_non_finite_values() {
    let root = temp_dir("db-readers");
    let clean = root.join("clean");
    finished_run(&clean);
    let draws = |dir: &Path| dir.join("draws_chain_1.csv");
    let rows = |dir: &Path| -> Vec<String> {
        std::fs::read_to_string(draws(dir))
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    };

    let appended = root.join("appended");
    copy_dir(&clean, &appended);
    let mut text = std::fs::read_to_string(draws(&appended)).unwrap();
    let last = rows(&appended).last().unwrap().clone();
    for _ in 0..5 {
        text += &format!("{last}\n");
    }
    std::fs::write(draws(&appended), &text).unwrap();
    readers_refuse(
        &appended,
        &["draws_chain_1.csv holds 45 draws", "records 40", "added"],
    );
    // Without the checkpoint the finished record in sampling.json still holds the count.
    std::fs::remove_file(appended.join("checkpoints").join("chain_1.json")).unwrap();
    readers_refuse(&appended, &["holds 45 draws", "sampling.json records 40"]);
    let o = run(&strings(&[
        "merge",
        "--out",
        &path(&root.join("merged")),
        &path(&appended),
    ]));
    assert!(!o.status.success());

    let nan = root.join("nan");
    copy_dir(&clean, &nan);
    let mut lines = rows(&nan);
    let mut cells: Vec<String> = lines[10].split(',').map(String::from).collect();
    let column = cells.len() - 1;
    cells[column] = "NaN".into();
    lines[10] = cells.join(",");
    std::fs::write(draws(&nan), lines.join("\n") + "\n").unwrap();
    readers_refuse(&nan, &["draws_chain_1.csv line 11", "NaN is not finite"]);

    // A run directory from before the per-chain record, with a checkpoint gone: nothing says
    // how long the file must be.
    let old = root.join("old");
    copy_dir(&clean, &old);
    let record = std::fs::read_to_string(old.join("sampling.json")).unwrap();
    let mut record: serde_json::Value = serde_json::from_str(&record).unwrap();
    record.as_object_mut().unwrap().remove("chain_draws");
    std::fs::write(old.join("sampling.json"), record.to_string()).unwrap();
    std::fs::remove_file(old.join("checkpoints").join("chain_0.json")).unwrap();
    readers_refuse(&old, &["has no checkpoint", "cannot be checked"]);

    // The untouched run reads as before.
    for reader in ["diagnose", "predict", "evaluate"] {
        let o = run(&strings(&[reader, &path(&clean)]));
        assert!(o.status.success(), "{reader}: {}", stderr(&o));
    }
}

/// A CSV dataset is stored by absolute path with its SHA-256: another working directory reads
/// it, and a changed file is refused naming both hashes.
#[test]
fn a_csv_dataset_is_pinned_by_path_and_hash() {
    let root = temp_dir("db-csv");
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut csv = String::from("x,y\n");
    for i in 0..60 {
        let x = i as f64 / 10.0;
        csv += &format!("{x},{}\n", (2.0 * x).cos() + 0.01 * (i % 7) as f64);
    }
    std::fs::write(data.join("d1.csv"), &csv).unwrap();
    let out = root.join("cr");
    let o = bnn()
        .current_dir(&data)
        .args(strings(&[
            "run",
            "--dataset",
            "d1.csv",
            "--hidden",
            "8",
            "--members",
            "2",
            "--epochs",
            "200",
            "--warmup",
            "30",
            "--draws",
            "40",
            "--max-depth",
            "4",
            "--threads",
            "1",
            "--out",
            &path(&out),
        ]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let config = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(config.contains(&path(&data.join("d1.csv"))), "{config}");
    assert!(config.contains("dataset_sha256"), "{config}");
    // From another directory.
    let o = bnn()
        .current_dir(&root)
        .args(["predict", "cr"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let predictions = std::fs::read(out.join("predictions.csv")).unwrap();
    // The file edited: refused, and predictions.csv is untouched.
    std::fs::write(data.join("d1.csv"), csv.replace("0.5,", "0.55,")).unwrap();
    let o = run(&strings(&["predict", &path(&out)]));
    assert!(!o.status.success());
    let message = stderr(&o);
    assert!(
        message.contains("d1.csv has changed") && message.matches("sha256").count() >= 2,
        "{message}"
    );
    assert_eq!(
        std::fs::read(out.join("predictions.csv")).unwrap(),
        predictions
    );
}

/// Killed in warmup and killed in sampling: predict and evaluate refuse, saying how far each
/// chain got; diagnose reads the checkpointed draws and says they are partial.
#[test]
fn predict_refuses_a_killed_run_and_says_how_far_it_got() {
    let root = temp_dir("db-partial");
    let trained_dir = root.join("trained");
    trained(&trained_dir);
    let iterations = ("200", "4000");
    for (name, ready_rows) in [("in-warmup", 0usize), ("in-sampling", 30)] {
        let dir = root.join(name);
        copy_dir(&trained_dir, &dir);
        let args = sample_into(
            &dir,
            &["--checkpoint-every", "2", "--max-depth", "6"],
            iterations,
        );
        let mut child = spawn(&args);
        let draws: PathBuf = dir.join("draws_chain_0.csv");
        let checkpoint = dir.join("checkpoints").join("chain_0.json");
        assert!(wait_until(Duration::from_secs(60), || {
            checkpoint.exists()
                && std::fs::read_to_string(&draws).is_ok_and(|t| t.lines().count() > ready_rows)
        }));
        kill9(&mut child);
        for reader in ["predict", "evaluate"] {
            let o = run(&strings(&[reader, &path(&dir)]));
            assert!(
                !o.status.success(),
                "{name}: {reader} accepted a killed run"
            );
            let message = stderr(&o);
            assert!(
                message.contains("has not finished sampling")
                    && message.contains("iteration")
                    && message.contains("--resume"),
                "{name}: {message}"
            );
        }
        assert!(!dir.join("predictions.csv").exists());
    }
}

/// A flag that contradicts a finished run in its directory is named with both values.
#[test]
fn a_contradicting_flag_on_a_sampled_directory_names_both_values() {
    let root = temp_dir("db-contradict");
    let dir = root.join("run");
    finished_run(&dir);
    let o = small_run(&dir, &["--target-accept", "0.9"]);
    assert!(!o.status.success());
    let message = stderr(&o);
    assert!(
        message.contains("another configuration")
            && message.contains("target_accept: 0.95 in the directory, 0.9 asked"),
        "{message}"
    );
}

//! Checkpoint and resume of `bnn sample`, tested on real processes: killed with SIGKILL during
//! warmup, during sampling and at arbitrary moments (so also while a row is being written),
//! interrupted with Ctrl-C (SIGINT), then resumed; the files must equal those of an
//! uninterrupted run byte for byte. Damaged or mismatched run directories are refused.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bnn() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bnn"))
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bnn-resume-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Cold-started NUTS on cos(2x) with a 32-unit net: a few seconds, checkpoints every 3 iterations.
fn sample_args(out: &Path) -> Vec<String> {
    [
        "sample",
        "--dataset",
        "cos2x",
        "--hidden",
        "32",
        "--activation",
        "tanh",
        "--init",
        "cold",
        "--chains",
        "2",
        "--warmup",
        "40",
        "--draws",
        "40",
        "--max-depth",
        "7",
        // The target these tests' stops were placed for (chain 1 extends its warmup at 0.8).
        "--target-accept",
        "0.8",
        "--seed",
        "5",
        "--threads",
        "1",
        "--checkpoint-every",
        "3",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([out.to_str().unwrap().to_string()])
    .collect()
}

/// `args` followed by `--out <out>`.
fn with_out(args: &[&str], out: &Path) -> Vec<String> {
    args.iter()
        .map(|s| s.to_string())
        .chain(["--out".to_string(), out.to_str().unwrap().to_string()])
        .collect()
}

fn resume_args(dir: &Path) -> Vec<String> {
    vec![
        "sample".into(),
        "--resume".into(),
        dir.to_str().unwrap().into(),
    ]
}

fn spawn(args: &[String]) -> Child {
    bnn()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bnn starts")
}

fn finish(child: Child) -> Output {
    child.wait_with_output().unwrap()
}

/// Iteration of chain `c`'s latest checkpoint, if one exists and parses.
fn checkpoint_iteration(dir: &Path, chain: usize) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join(format!("checkpoints/chain_{chain}.json"))).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["state"]["iteration"].as_u64()
}

/// Waits until `ready` holds (or the process ended), then kills the process with `signal`.
fn kill_when(mut child: Child, signal: &str, ready: impl Fn() -> bool) -> Output {
    let start = Instant::now();
    while !ready()
        && child.try_wait().unwrap().is_none()
        && start.elapsed() < Duration::from_secs(120)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status();
    finish(child)
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for chain in 0..2 {
        for name in [
            format!("draws_chain_{chain}.csv"),
            format!("adaptation_chain_{chain}.csv"),
        ] {
            out.push((
                name.clone(),
                std::fs::read(dir.join(&name)).unwrap_or_default(),
            ));
        }
    }
    out
}

fn assert_same_files(reference: &Path, resumed: &Path) {
    for ((name, want), (_, got)) in files(reference).iter().zip(files(resumed)) {
        assert!(!want.is_empty(), "{name} of the reference run is empty");
        assert!(
            *want == got,
            "{name} differs after resume ({} vs {} bytes)",
            want.len(),
            got.len()
        );
    }
}

#[test]
fn killed_and_interrupted_runs_resume_to_the_uninterrupted_draws() {
    let root = temp_dir("kill");
    let reference = root.join("reference");
    let o = finish(spawn(&sample_args(&reference)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // 1. SIGKILL during chain 0's warmup, 2. SIGKILL during chain 1's sampling, 3. Ctrl-C, then
    // resume to the end.
    let run = root.join("killed");
    let o = kill_when(spawn(&sample_args(&run)), "-KILL", || {
        checkpoint_iteration(&run, 0).is_some_and(|i| (6..40).contains(&i))
    });
    assert!(
        !o.status.success(),
        "the run should have been killed in warmup"
    );
    let o = kill_when(spawn(&resume_args(&run)), "-KILL", || {
        checkpoint_iteration(&run, 1).is_some_and(|i| i > 45)
    });
    assert!(
        !o.status.success(),
        "the resumed run should have been killed in sampling"
    );
    let o = kill_when(spawn(&resume_args(&run)), "-INT", || {
        checkpoint_iteration(&run, 1).is_some_and(|i| i > 60)
    });
    let message = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && message.contains("--resume"),
        "Ctrl-C should stop with a resume hint: {message}"
    );
    let o = finish(spawn(&resume_args(&run)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_files(&reference, &run);

    // Kills at arbitrary moments (whatever is being written then), each followed by a resume.
    let run = root.join("arbitrary");
    let mut child = spawn(&sample_args(&run));
    for delay_ms in [150u64, 400, 90, 700, 250] {
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        child = spawn(&resume_args(&run));
    }
    let o = finish(child);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_files(&reference, &run);

    // A finished run resumes to the same files (nothing to do).
    let o = finish(spawn(&resume_args(&run)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_files(&reference, &run);
}

/// The stationary warmup (the default of NUTS) extends chain 1's warmup on this setting (a
/// 64-64 net from a cold start, depth-3 trees): killed with SIGKILL inside that extension, after
/// its first check failed and before its warmup ended, the resumed run makes the uninterrupted
/// run's files byte for byte.
#[test]
fn killed_inside_a_stationary_warmup_extension_resumes_to_the_uninterrupted_draws() {
    let args = |out: &Path| -> Vec<String> {
        let mut args = sample_args(out);
        for (flag, value) in [("--hidden", "64,64"), ("--max-depth", "3")] {
            let at = args.iter().position(|a| a == flag).unwrap();
            args[at + 1] = value.into();
        }
        args
    };
    let root = temp_dir("extension");
    let reference = root.join("reference");
    let o = finish(spawn(&args(&reference)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(reference.join("checkpoints/chain_1.json")).unwrap();
    let checkpoint: serde_json::Value = serde_json::from_str(&text).unwrap();
    let checks = checkpoint["state"]["warmup"]["stationary"]["checks"]
        .as_array()
        .expect("the stationary policy's checks in chain 1's checkpoint");
    assert!(
        checks.len() >= 2,
        "chain 1's warmup should have been extended: {checks:?}"
    );
    let first_check_end = checks[0]["end"].as_u64().unwrap();
    let warmup_end = checks.last().unwrap()["end"].as_u64().unwrap();

    let run = root.join("killed");
    let inside = |i: u64| i > first_check_end && i + 3 < warmup_end;
    let o = kill_when(spawn(&args(&run)), "-KILL", || {
        checkpoint_iteration(&run, 1).is_some_and(inside)
    });
    assert!(!o.status.success(), "the run should have been killed");
    let at = checkpoint_iteration(&run, 1).unwrap();
    assert!(
        inside(at),
        "killed at chain 1's iteration {at}, not inside its extension ({first_check_end}..{warmup_end})"
    );
    let o = finish(spawn(&resume_args(&run)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_files(&reference, &run);
}

#[test]
fn damaged_or_mismatched_run_directories_are_refused_without_losing_anything() {
    let root = temp_dir("refuse");
    let run = root.join("run");
    let o = kill_when(spawn(&sample_args(&run)), "-KILL", || {
        checkpoint_iteration(&run, 0).is_some_and(|i| i >= 20)
    });
    assert!(!o.status.success());
    let before = files(&run);

    // Another configuration.
    let mut args = resume_args(&run);
    args.extend(["--draws".into(), "41".into()]);
    let o = bnn().args(&args).output().unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("refused"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // A corrupt checkpoint.
    let checkpoint = run.join("checkpoints/chain_0.json");
    let saved = std::fs::read(&checkpoint).unwrap();
    std::fs::write(&checkpoint, &saved[..saved.len() / 2]).unwrap();
    let o = bnn().args(resume_args(&run)).output().unwrap();
    assert!(!o.status.success());
    let message = String::from_utf8_lossy(&o.stderr);
    assert!(
        message.contains("corrupt") && message.contains("chain_0.json"),
        "{message}"
    );
    assert!(
        files(&run) == before,
        "a refused resume must not touch the draws"
    );

    // Not a run directory at all.
    let o = bnn()
        .args(resume_args(&root.join("nothing-here")))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a run directory"));

    // With the checkpoint restored the run completes.
    std::fs::write(&checkpoint, &saved).unwrap();
    let o = bnn().args(resume_args(&run)).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// MCLMC keeps its unit velocity in the state and, in its last tuning phase, the positions it
/// measures the ESS on (periodic checkpoints wait out that phase): killed in the first tuning
/// phase, in the last one and in sampling, it still resumes to the uninterrupted run's bytes.
#[test]
fn killed_mclmc_runs_resume_to_the_uninterrupted_draws() {
    let root = temp_dir("mclmc");
    let args = |out: &Path| {
        with_out(
            &[
                "sample",
                "--dataset",
                "cos2x",
                "--hidden",
                "64",
                "--activation",
                "tanh",
                "--init",
                "cold",
                "--chains",
                "2",
                "--sampler",
                "mclmc",
                "--warmup",
                "20000",
                "--draws",
                "10000",
                "--thin",
                "5",
                "--seed",
                "7",
                "--threads",
                "1",
                "--checkpoint-every",
                "200",
            ],
            out,
        )
    };
    let reference = root.join("reference");
    let o = finish(spawn(&args(&reference)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let header = std::fs::read_to_string(reference.join("draws_chain_0.csv")).unwrap();
    assert!(header.starts_with("lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,energy_change__,trajectory_length__,"));

    let run = root.join("killed");
    // Phase 1 of the tuning (0.8 of 20,000 steps), then phase 3 (the last 2,000), then sampling.
    let o = kill_when(spawn(&args(&run)), "-KILL", || {
        checkpoint_iteration(&run, 0).is_some_and(|i| (1000..15000).contains(&i))
    });
    assert!(
        !o.status.success(),
        "the run should have been killed in phase 1"
    );
    let o = kill_when(spawn(&resume_args(&run)), "-KILL", || {
        std::fs::read_to_string(run.join("adaptation_chain_1.csv"))
            .is_ok_and(|t| t.lines().count() > 18_500)
    });
    assert!(
        !o.status.success(),
        "the resumed run should have been killed in phase 3"
    );
    let o = kill_when(spawn(&resume_args(&run)), "-KILL", || {
        checkpoint_iteration(&run, 0).is_some_and(|i| i > 22_000)
    });
    assert!(
        !o.status.success(),
        "the resumed run should have been killed in sampling"
    );
    let o = finish(spawn(&resume_args(&run)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_files(&reference, &run);
}

/// MSD keeps its momentum between iterations (Horowitz persistence), so a resumed chain must
/// continue with the momentum it had: killed in the warmup and in sampling, the run still ends
/// with the uninterrupted run's files. The heteroscedastic head, so its metric moves with the
/// scale outputs too.
#[test]
fn killed_msd_runs_resume_to_the_uninterrupted_draws() {
    let root = temp_dir("msd");
    let args = |out: &Path| {
        with_out(
            &[
                "sample",
                "--dataset",
                "cos2x",
                "--hidden",
                "6",
                "--activation",
                "tanh",
                "--init",
                "cold",
                "--chains",
                "2",
                "--sampler",
                "msd",
                "--warmup",
                "150",
                "--draws",
                "200",
                "--seed",
                "9",
                "--threads",
                "1",
                "--checkpoint-every",
                "10",
            ],
            out,
        )
    };
    let reference = root.join("reference");
    let o = finish(spawn(&args(&reference)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let header = std::fs::read_to_string(reference.join("draws_chain_0.csv")).unwrap();
    assert!(header.starts_with("lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,energy_change__,fixed_point_iterations__,"));

    let run = root.join("killed");
    let o = kill_when(spawn(&args(&run)), "-KILL", || {
        checkpoint_iteration(&run, 0).is_some_and(|i| (30..140).contains(&i))
    });
    assert!(
        !o.status.success(),
        "the run should have been killed in the warmup"
    );
    let o = kill_when(spawn(&resume_args(&run)), "-KILL", || {
        checkpoint_iteration(&run, 0).is_some_and(|i| i > 200)
    });
    assert!(
        !o.status.success(),
        "the resumed run should have been killed in sampling"
    );
    let o = finish(spawn(&resume_args(&run)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_files(&reference, &run);
}

/// LAPS tunes its chains together, so they must resume from one common iteration. Killed in the
/// burn-in and in sampling, then a round torn by hand (two chains' newest checkpoints replaced by
/// their previous ones, as when a kill comes between the chains' checkpoint writes): every
/// resume ends with the uninterrupted run's files, all four chains.
#[test]
fn killed_laps_runs_and_torn_checkpoint_rounds_resume_to_the_uninterrupted_draws() {
    let root = temp_dir("laps");
    let args = |out: &Path| {
        with_out(
            &[
                "sample",
                "--dataset",
                "cos2x",
                "--hidden",
                "64",
                "--activation",
                "tanh",
                "--init",
                "cold",
                "--chains",
                "4",
                "--sampler",
                "laps",
                "--warmup",
                "4000",
                "--draws",
                "400",
                "--seed",
                "9",
                "--threads",
                "2",
                "--checkpoint-every",
                "7",
            ],
            out,
        )
    };
    let all_files = |dir: &Path| -> Vec<(String, Vec<u8>)> {
        (0..4)
            .flat_map(|c| {
                [
                    format!("draws_chain_{c}.csv"),
                    format!("adaptation_chain_{c}.csv"),
                ]
            })
            .map(|name| {
                let bytes = std::fs::read(dir.join(&name)).unwrap_or_default();
                (name, bytes)
            })
            .collect()
    };
    let same = |reference: &Path, resumed: &Path| {
        for ((name, want), (_, got)) in all_files(reference).iter().zip(all_files(resumed)) {
            assert!(!want.is_empty(), "{name} of the reference run is empty");
            assert!(
                *want == got,
                "{name} differs after resume ({} vs {} bytes)",
                want.len(),
                got.len()
            );
        }
    };
    let reference = root.join("reference");
    let o = finish(spawn(&args(&reference)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let run = root.join("killed");
    let o = kill_when(spawn(&args(&run)), "-KILL", || {
        checkpoint_iteration(&run, 3).is_some_and(|i| i > 200)
    });
    assert!(
        !o.status.success(),
        "the run should have been killed in its burn-in"
    );
    let warmup = |dir: &Path| {
        std::fs::read_to_string(dir.join("adaptation_chain_0.csv")).map_or(0, |t| t.lines().count())
    };
    let burn_in = warmup(&reference) as u64;
    let o = kill_when(spawn(&resume_args(&run)), "-KILL", || {
        checkpoint_iteration(&run, 3).is_some_and(|i| i > burn_in + 100)
    });
    assert!(
        !o.status.success(),
        "the resumed run should have been killed in sampling"
    );
    // Tear the latest round: chains 0 and 1, where they reached it, lose their newest
    // checkpoint (the kill may have torn it already; either way one round apart at most).
    let newest = (0..4).filter_map(|c| checkpoint_iteration(&run, c)).max();
    for c in 0..2 {
        let previous = run.join(format!("checkpoints/chain_{c}.previous.json"));
        let latest = run.join(format!("checkpoints/chain_{c}.json"));
        if previous.exists() && checkpoint_iteration(&run, c) == newest {
            std::fs::copy(&previous, &latest).unwrap();
        }
    }
    let iterations: Vec<Option<u64>> = (0..4).map(|c| checkpoint_iteration(&run, c)).collect();
    assert!(
        iterations.iter().any(|i| *i != iterations[0]) || iterations[0] < newest,
        "no round was torn: {iterations:?}"
    );
    let o = finish(spawn(&resume_args(&run)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    same(&reference, &run);

    // Sharding an ensemble is refused by name, and writes nothing.
    let shard = root.join("shard");
    let mut sharded = args(&shard);
    sharded[0] = "run".into();
    sharded.extend(["--shard".to_string(), "0/2".to_string()]);
    let o = finish(spawn(&sharded));
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("--shard") && stderr.contains("laps"),
        "{stderr}"
    );
}

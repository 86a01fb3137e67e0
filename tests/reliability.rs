//! Nothing lost, nothing half-written: bad invocations refused with nothing written, cut draws
//! files refused by name, merges that are whole or absent, training stopped by SIGTERM and
//! continued, a full disk that names its cause, and `bnn train` then `bnn sample`. Real
//! processes and real files throughout.

#[path = "support/run_dirs.rs"]
mod run_dirs;

use run_dirs::{bnn, run_args, temp_dir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

fn run(args: &[String]) -> Output {
    bnn().args(args).output().expect("bnn starts")
}

fn run_strs(args: &[&str]) -> Output {
    bnn().args(args).output().expect("bnn starts")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every file under `dir` with its bytes (an empty map for a missing directory), less the lock
/// file: each command that opens the directory records itself there as its holder.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path.clone());
                files.insert(path, Vec::new());
            } else if entry.file_name() != ".lock" {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// The small DEI-MCMC of the reproductions: cos(2x), 2 members, 50 + 100 iterations.
const B: [(&str, &str); 9] = [
    ("--dataset", "cos2x"),
    ("--hidden", "8"),
    ("--members", "2"),
    ("--epochs", "300"),
    ("--warmup", "50"),
    ("--draws", "100"),
    ("--threads", "1"),
    ("--seed", "1"),
    ("--max-depth", "5"),
];

/// `bnn <command>` with B's flags, each replaced by `extra`'s value where `extra` gives it.
fn with_b(command: &str, extra: &[&str], out: &Path) -> Vec<String> {
    let mut args = vec![command.to_string()];
    // `--max-depth` is NUTS's setting: another sampler would refuse it.
    let other_sampler = extra
        .windows(2)
        .any(|w| w[0] == "--sampler" && w[1] != "nuts");
    for (flag, value) in B {
        let nuts_only = other_sampler && flag == "--max-depth";
        if !(extra.contains(&flag) || nuts_only) {
            args.extend([flag.to_string(), value.to_string()]);
        }
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--out".to_string(), out.to_str().unwrap().to_string()]);
    args
}

/// A finished `bnn run` of B into `dir`.
fn finished_run(dir: &Path) {
    let o = run(&with_b("run", &[], dir));
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn bad_invocations_are_refused_by_name_and_leave_nothing_behind() {
    let root = temp_dir("refusals");
    let finished = root.join("finished");
    finished_run(&finished);
    let config = |name: &str, text: &str| -> String {
        let path = root.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let typo = config("typo.toml", "[sampler]\ndraw = 300\n");
    let nan = config("nan.toml", "[sampler]\ntarget_accept = nan\n");
    let infinite = config("inf.toml", "[ensemble]\nlearning_rate = inf\n");
    let missing = root.join("missing.toml").to_str().unwrap().to_string();
    let not_a_member = config("not-a-member.safetensors", "these are not safetensors");
    // (command, its flags besides B, text the message must contain)
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        ("run", vec!["--learning-rate", "nan"], "--learning-rate"),
        ("run", vec!["--weight-decay", "nan"], "--weight-decay"),
        ("run", vec!["--learning-rate=-1"], "--learning-rate"),
        ("run", vec!["--learning-rate", "-1"], "--learning-rate"),
        ("run", vec!["--weight-decay", "-0.5"], "--weight-decay"),
        ("run", vec!["--target-accept", "1.5"], "--target-accept"),
        ("run", vec!["--target-accept", "inf"], "--target-accept"),
        (
            "run",
            vec!["--sampler", "hmc", "--num-steps", "0"],
            "--num-steps",
        ),
        ("run", vec!["--max-depth", "0"], "--max-depth"),
        ("run", vec!["--max-depth", "40"], "--max-depth"),
        (
            "run",
            vec!["--sampler", "rwm", "--target-accept", "1.5"],
            "--target-accept",
        ),
        ("run", vec!["--step-size", "-1"], "--step-size"),
        ("run", vec!["--step-size", "nan"], "--step-size"),
        ("run", vec!["--warmup", "0"], "--warmup"),
        (
            "sample",
            vec!["--sampler", "mams", "--warmup", "0"],
            "--warmup",
        ),
        ("run", vec!["--hidden", "8,,8"], "--hidden"),
        ("run", vec!["--hidden", "8,0"], "--hidden"),
        ("run", vec!["--test-fraction", "1.5"], "--test-fraction"),
        ("run", vec!["--test-fraction", "nan"], "--test-fraction"),
        (
            "run",
            vec!["--validation-fraction", "0.95"],
            "--validation-fraction",
        ),
        ("run", vec!["--draws", "0"], "--draws"),
        ("run", vec!["--draws", "3"], "4 kept draws"),
        ("run", vec!["--thin", "0"], "--thin"),
        ("run", vec!["--threads", "0"], "--threads"),
        ("run", vec!["--members", "0"], "--members"),
        ("train", vec!["--epochs", "0"], "--epochs"),
        ("run", vec!["--batch-size", "0"], "--batch-size"),
        ("run", vec!["--patience", "3"], "--patience"),
        ("run", vec!["--init", "single"], "--init-from"),
        ("run", vec!["--init-from", &missing], "--init-from"),
        ("run", vec!["--init-from", &not_a_member], "--init-from"),
        ("run", vec!["--activation", "swish2"], "--activation"),
        ("run", vec!["--device", "tpu"], "--device"),
        ("run", vec!["--prior", "normal:nan"], "--prior"),
        ("run", vec!["--prior", "normal:-1"], "--prior"),
        ("run", vec!["--layer-prior", "0=laplace:0"], "--layer-prior"),
        ("run", vec!["--likelihood", "fixed:-1"], "--likelihood"),
        ("run", vec!["--likelihood", "poisson"], "--likelihood"),
        (
            "run",
            vec!["--dataset", "no-such-dataset"],
            "no-such-dataset",
        ),
        (
            "run",
            vec!["--sampler", "mclmc", "--target-accept", "0.8"],
            "--target-accept",
        ),
        (
            "run",
            vec!["--sampler", "mclmc", "--tune-fractions", "0.5,0.3"],
            "--tune-fractions",
        ),
        (
            "run",
            vec!["--energy-variance-start", "nan"],
            "--energy-variance-start",
        ),
        (
            "run",
            vec!["--trajectory-length-factor", "inf"],
            "--trajectory-length-factor",
        ),
        (
            "run",
            vec!["--sampler", "msd", "--persistence", "1.5"],
            "persistence",
        ),
        ("run", vec!["--persistence", "0.9"], "--persistence"),
        (
            "run",
            vec!["--sampler", "msd", "--batched", "true"],
            "--batched",
        ),
        ("run", vec!["--adapt", "false"], "--step-size"),
        (
            "run",
            vec!["--early-stop", "true", "--early-stop-tolerance", "0"],
            "--early-stop",
        ),
        ("run", vec!["--config", &typo], "draw"),
        ("run", vec!["--config", &nan], "target_accept"),
        ("run", vec!["--config", &infinite], "learning_rate"),
        ("run", vec!["--config", &missing], "missing.toml"),
        ("run", vec!["--shard", "3/3"], "shard 3/3"),
        // Sizes that overflow or outgrow the machine, by flag, before anything is trained.
        (
            "run",
            vec!["--hidden", "99999999999"],
            "--hidden '99999999999' / --members 2",
        ),
        (
            "run",
            vec!["--hidden", "18446744073709551615,18446744073709551615"],
            "--hidden (config key `hidden`) must be at most 9223372036854775807",
        ),
        (
            "run",
            vec!["--seed", "18446744073709551615"],
            "--seed (config key `seed`) must be at most",
        ),
        (
            "run",
            vec!["--draws", "18446744073709551615"],
            "--draws (config key `draws`) must be at most",
        ),
        (
            "run",
            vec!["--chains", "18446744073709551615"],
            "--chains (config key `chains`) must be at most",
        ),
        (
            "run",
            vec!["--split-seed", "9223372036854775808"],
            "--split-seed (config key `split_seed`)",
        ),
        (
            "run",
            vec!["--max-depth", "18446744073709551615"],
            "--max-depth must be at most",
        ),
        (
            "run",
            vec![
                "--warmup",
                "9223372036854775807",
                "--draws",
                "9223372036854775807",
                "--thin",
                "1",
            ],
            "--warmup 9223372036854775807 + --draws 9223372036854775807",
        ),
        (
            "run",
            vec!["--chains", "0"],
            "--chains (config key `chains`) must be at least 1",
        ),
        // Negative numbers in every spelling are the flag's value, refused by range.
        ("run", vec!["--step-size", "-1e-3"], "--step-size"),
        ("run", vec!["--step-size", "-.5"], "--step-size"),
        ("run", vec!["--step-size", "-inf"], "--step-size"),
        (
            "run",
            vec!["--sampler", "mclmc", "--energy-variance-end", "-1e-4"],
            "--energy-variance-end",
        ),
    ];
    assert!(cases.len() >= 30);
    for (i, (command, flags, expected)) in cases.iter().enumerate() {
        let out = root.join(format!("case-{i}"));
        let o = run(&with_b(command, flags, &out));
        let message = stderr(&o);
        let shown = format!("bnn {command} {} ...: {message}", flags.join(" "));
        assert!(!o.status.success(), "accepted: {shown}");
        assert!(
            message.contains(expected),
            "the message does not name `{expected}`: {shown}"
        );
        assert!(!message.contains("panicked"), "{shown}");
        assert!(!out.exists(), "left {} behind: {shown}", out.display());
    }
    // `bnn model info` refuses a parameter count that overflows instead of wrapping it.
    let hidden = "18446744073709551615,18446744073709551615";
    let o = run_strs(&["model", "info", "--features", "1", "--hidden", hidden]);
    let message = stderr(&o);
    assert!(
        o.status.code() == Some(1)
            && message.starts_with("error: --hidden")
            && message.contains("parameter count overflows"),
        "bnn model info --hidden {hidden}: {:?} {message}",
        o.status
    );
    // Into a finished run directory: refused, and the directory is not touched.
    let before = snapshot(&finished);
    for (flags, expected) in [
        (vec!["--target-accept", "0.9"], "another configuration"),
        (vec!["--target-accept", "1.5"], "--target-accept"),
        (vec!["--learning-rate", "nan"], "--learning-rate"),
    ] {
        let o = run(&with_b("run", &flags, &finished));
        assert!(
            !o.status.success() && stderr(&o).contains(expected),
            "{flags:?}: {}",
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"));
    }
    let o = run(&with_b("sample", &[], &finished));
    assert!(
        !o.status.success() && stderr(&o).contains("already holds draws"),
        "{}",
        stderr(&o)
    );
    for args in [
        vec![
            "sample".to_string(),
            "--resume".into(),
            finished.to_str().unwrap().into(),
            "--draws".into(),
            "7".into(),
        ],
        vec![
            "merge".to_string(),
            "--out".into(),
            root.join("merged").to_str().unwrap().into(),
            finished.to_str().unwrap().into(),
        ],
        vec![
            "diagnose".to_string(),
            root.join("no-such-run").to_str().unwrap().into(),
        ],
        vec![
            "predict".to_string(),
            root.join("no-such-run").to_str().unwrap().into(),
        ],
    ] {
        let o = run(&args);
        assert!(
            !o.status.success() && !stderr(&o).contains("panicked"),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains("--resume")
                || stderr(&o).contains("shard.json")
                || stderr(&o).contains("no-such-run"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert!(!root.join("merged").exists());
    assert_eq!(
        snapshot(&finished),
        before,
        "a refusal changed the finished run"
    );
}

#[test]
fn a_cut_draws_file_is_an_error_that_names_it_and_both_counts() {
    let root = temp_dir("cut-draws");
    let dir = root.join("d");
    finished_run(&dir);
    for command in ["diagnose", "predict", "evaluate"] {
        let o = run_strs(&[command, dir.to_str().unwrap()]);
        assert!(
            o.status.success(),
            "{command} on the whole run: {}",
            stderr(&o)
        );
    }
    // The header and 40 of chain 1's 100 draws.
    let path = dir.join("draws_chain_1.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let cut: String = text.lines().take(41).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, cut).unwrap();
    for command in ["diagnose", "predict", "evaluate"] {
        let o = run_strs(&[command, dir.to_str().unwrap()]);
        let message = stderr(&o);
        assert!(!o.status.success(), "{command} accepted a cut draws file");
        assert!(
            message.contains("draws_chain_1.csv")
                && message.contains("holds 40 draws")
                && message.contains("records 100"),
            "{command}: {message}"
        );
    }
    // A missing chain file is not diagnosed away either.
    std::fs::remove_file(&path).unwrap();
    let o = run_strs(&["diagnose", dir.to_str().unwrap()]);
    assert!(
        !o.status.success() && stderr(&o).contains("draws_chain_1.csv is missing"),
        "{}",
        stderr(&o)
    );
}

/// The three shards: 4 chains of a tanh net (50 + 100 iterations), shard i of 3 in
/// `root/s<i>`.
fn three_shards(root: &Path) -> Vec<PathBuf> {
    (0..3)
        .map(|i| {
            let dir = root.join(format!("s{i}"));
            let o = run(&run_args(
                &dir,
                &[
                    "--shard",
                    &format!("{i}/3"),
                    "--members",
                    "3",
                    "--chains",
                    "4",
                    "--seed",
                    "3",
                    "--warmup",
                    "50",
                    "--draws",
                    "100",
                ],
            ));
            assert!(o.status.success(), "shard {i}: {}", stderr(&o));
            dir
        })
        .collect()
}

fn merge(out: &Path, shards: &[PathBuf]) -> Output {
    bnn()
        .arg("merge")
        .arg("--out")
        .arg(out)
        .args(shards)
        .output()
        .expect("bnn starts")
}

#[test]
fn merge_refuses_damaged_shards_before_writing_and_is_whole_or_absent() {
    let root = temp_dir("merge-damage");
    let shards = three_shards(&root);
    let s2 = &shards[2];
    let out = root.join("results").join("merged");
    // Each damage in turn, then the shard restored.
    let draws = s2.join("draws_chain_2.csv");
    let member = s2.join("ensemble/member_02.safetensors");
    let (draws_bytes, member_bytes) = (
        std::fs::read(&draws).unwrap(),
        std::fs::read(&member).unwrap(),
    );
    let text = String::from_utf8(draws_bytes.clone()).unwrap();
    let fifty: String = text.lines().take(51).map(|l| format!("{l}\n")).collect();
    let mid_row = &text[..text.len() - 7];
    type Damage<'a> = (&'a str, Box<dyn Fn() + 'a>, &'a str);
    let damages: Vec<Damage<'_>> = vec![
        (
            "cut to 50 draws",
            Box::new(|| std::fs::write(&draws, &fifty).unwrap()),
            "holds 50 draws",
        ),
        (
            "cut mid-row",
            Box::new(|| std::fs::write(&draws, mid_row).unwrap()),
            "holds 99 draws",
        ),
        (
            "draws removed",
            Box::new(|| std::fs::remove_file(&draws).unwrap()),
            "draws_chain_2.csv is missing",
        ),
        (
            "member removed",
            Box::new(|| std::fs::remove_file(&member).unwrap()),
            "member_02.safetensors is missing",
        ),
        (
            "member cut short",
            Box::new(|| std::fs::write(&member, &member_bytes[..member_bytes.len() / 2]).unwrap()),
            "member_02.safetensors",
        ),
    ];
    for (what, damage, expected) in damages {
        damage();
        let o = merge(&out, &shards);
        let message = stderr(&o);
        assert!(!o.status.success(), "{what}: merged");
        assert!(message.contains(expected), "{what}: {message}");
        assert!(
            message.contains(s2.to_str().unwrap()),
            "{what}: the message must name the shard's file: {message}"
        );
        assert!(
            !out.exists() && !root.join("results").exists(),
            "{what}: left {} behind",
            out.display()
        );
        let leftovers: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{what}: {leftovers:?}");
        std::fs::write(&draws, &draws_bytes).unwrap();
        std::fs::write(&member, &member_bytes).unwrap();
    }
    let o = merge(&out, &shards);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join("summary.json").is_file() && out.join("diagnostics.json").is_file());
    // What it says it wrote is where the files are, not the staging directory renamed away.
    let said = format!("{}{}", stderr(&o), String::from_utf8_lossy(&o.stdout));
    assert!(
        !said.contains(".merging-")
            && said.contains(&format!("wrote {}", out.join("summary.json").display())),
        "{said}"
    );
    let files: Vec<_> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        files,
        vec![std::ffi::OsString::from("merged")],
        "only the merged run beside it"
    );
}

fn send(child: &std::process::Child, signal: libc::c_int) {
    // SAFETY: kill(2) on the pid of a child we own.
    unsafe {
        libc::kill(child.id() as libc::pid_t, signal);
    }
}

/// Waits for `path` to exist, at most `limit`.
fn wait_for(path: &Path, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn sigterm_during_training_saves_finished_members_exits_75_and_the_same_command_continues() {
    let root = temp_dir("train-sigterm");
    // Two members one after the other (one thread); each takes a few seconds.
    let train = |out: &Path| -> Vec<String> {
        [
            "train",
            "--dataset",
            "cos2x",
            "--hidden",
            "32,32",
            "--activation",
            "tanh",
            "--members",
            "2",
            "--epochs",
            "6000",
            "--threads",
            "1",
            "--seed",
            "4",
            "--out",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([out.to_str().unwrap().to_string()])
        .collect()
    };
    let whole = root.join("whole");
    let o = run(&train(&whole));
    assert!(o.status.success(), "{}", stderr(&o));

    let stopped = root.join("stopped");
    let child = bnn()
        .args(train(&stopped))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Member 0 is saved as soon as it is trained; stop while member 1 trains.
    assert!(
        wait_for(
            &stopped.join("ensemble/unfinished.json"),
            Duration::from_secs(120)
        ),
        "member 0 was never saved"
    );
    let signalled = Instant::now();
    send(&child, libc::SIGTERM);
    let o = child.wait_with_output().unwrap();
    let waited = signalled.elapsed();
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(
        waited < Duration::from_secs(5),
        "training took {waited:?} to stop"
    );
    assert!(
        stderr(&o).contains("1 of 2 members trained and saved"),
        "{}",
        stderr(&o)
    );
    assert!(
        stopped.join("ensemble/member_00.safetensors").is_file()
            && !stopped.join("ensemble/members.json").exists()
    );

    let o = run(&train(&stopped));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("members [0] were saved by an earlier, stopped training"),
        "{}",
        stderr(&o)
    );
    for j in 0..2 {
        let name = format!("ensemble/member_{j:02}.safetensors");
        assert_eq!(
            std::fs::read(whole.join(&name)).unwrap(),
            std::fs::read(stopped.join(&name)).unwrap(),
            "{name}"
        );
    }
    assert!(!stopped.join("ensemble/unfinished.json").exists());
}

#[test]
fn sigterm_during_a_study_keeps_finished_parts_and_says_what_is_missing() {
    let root = temp_dir("study-sigterm");
    let out = root.join("dinh");
    // Table 2 at toy size first (a moment), then the architecture part on a 400x400x400 net,
    // which runs for minutes.
    let child = bnn()
        .args([
            "study",
            "dinh",
            "--parts",
            "table2,architectures",
            "--activations",
            "tanh",
            "--num-steps",
            "5",
            "--step-sizes",
            "0.01",
            "--seeds",
            "2",
            "--draws",
            "20",
            "--burn-in",
            "5",
            "--architectures",
            "400x400x400",
            "--threads",
            "1",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_for(&out.join("table2.md"), Duration::from_secs(120)),
        "table 2 was never written"
    );
    std::thread::sleep(Duration::from_millis(300));
    send(&child, libc::SIGTERM);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let study: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("study.json")).unwrap()).unwrap();
    assert_eq!(study["status"], "interrupted");
    assert_eq!(study["finished_parts"], serde_json::json!(["table2"]));
    assert_eq!(study["missing_parts"], serde_json::json!(["architectures"]));
    assert!(out.join("table2.md").is_file());
}

#[test]
fn a_full_disk_names_its_os_cause_and_leaves_no_temporary_file() {
    let root = temp_dir("full-disk");
    let out = root.join("d");
    let mut command = bnn();
    command.args(with_b("run", &[], &out));
    // A 24 KB limit on every file this process writes: the draws files pass it mid-run, and
    // the write fails with EFBIG ("File too large"), as a full disk fails with ENOSPC.
    // SAFETY: setrlimit and signal in the child before exec; both are async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 24 * 1024,
                rlim_max: 24 * 1024,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let o = command.output().unwrap();
    let message = stderr(&o);
    assert!(!o.status.success());
    assert!(
        message.contains("File too large") && message.contains(out.to_str().unwrap()),
        "{message}"
    );
    assert!(!message.contains("panicked"), "{message}");
    let temporary: Vec<_> = snapshot(&out)
        .into_keys()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".tmp"))
        })
        .collect();
    assert!(temporary.is_empty(), "{temporary:?}");

    // A real full disk where this process may mount a tmpfs (root): "No space left on device".
    let small = root.join("tmpfs");
    std::fs::create_dir_all(&small).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=96k", "tmpfs"])
        .arg(&small)
        .output()
        .is_ok_and(|o| o.status.success());
    if !mounted {
        eprintln!(
            "skipping the tmpfs part of a_full_disk_names_its_os_cause: cannot mount a tmpfs here"
        );
        return;
    }
    let o = run(&with_b("run", &[], &small.join("d")));
    let message = stderr(&o);
    let leftovers: Vec<_> = snapshot(&small)
        .into_keys()
        .filter(|p| p.to_string_lossy().ends_with(".tmp"))
        .collect();
    let _ = std::process::Command::new("umount").arg(&small).output();
    assert!(!o.status.success());
    assert!(message.contains("No space left on device"), "{message}");
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn sample_into_a_trained_directory_takes_its_ensemble_settings() {
    let root = temp_dir("train-then-sample");
    let trained = root.join("a");
    let train: Vec<&str> = vec![
        "train",
        "--dataset",
        "cos2x",
        "--split-seed",
        "1",
        "--hidden",
        "8,8",
        "--activation",
        "relu",
        "--members",
        "2",
        "--epochs",
        "300",
        "--seed",
        "5",
        "--threads",
        "1",
        "--out",
    ];
    let o = bnn().args(&train).arg(&trained).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let copy = root.join("b");
    copy_dir(&trained, &copy);
    // Only sampler flags: data, model, ensemble and seed come from a's config.toml.
    let o = bnn()
        .args([
            "sample",
            "--warmup",
            "20",
            "--draws",
            "30",
            "--max-depth",
            "5",
            "--threads",
            "1",
            "--out",
        ])
        .arg(&trained)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let config = std::fs::read_to_string(trained.join("config.toml")).unwrap();
    assert!(
        config.contains("hidden = [\n    8,\n    8,\n]") || config.contains("hidden = [8, 8]"),
        "{config}"
    );
    assert!(
        config.contains("seed = 5") && config.contains("draws = 30"),
        "{config}"
    );
    // The same draws as one `bnn run` with every flag.
    let whole = root.join("whole");
    let mut args: Vec<&str> = train[1..train.len() - 1].to_vec();
    args.splice(0..0, ["run"]);
    args.extend([
        "--warmup",
        "20",
        "--draws",
        "30",
        "--max-depth",
        "5",
        "--out",
    ]);
    let o = bnn().args(&args).arg(&whole).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    for chain in 0..2 {
        let name = format!("draws_chain_{chain}.csv");
        assert_eq!(
            std::fs::read(trained.join(&name)).unwrap(),
            std::fs::read(whole.join(&name)).unwrap(),
            "{name}"
        );
    }
    // A second sampler from the same ensemble: --from copies it into a new directory.
    let mams = root.join("mams");
    let o = bnn()
        .args([
            "sample",
            "--sampler",
            "mams",
            "--warmup",
            "40",
            "--draws",
            "10",
            "--threads",
            "1",
            "--from",
        ])
        .arg(&trained)
        .arg("--out")
        .arg(&mams)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(trained.join("ensemble/member_01.safetensors")).unwrap(),
        std::fs::read(mams.join("ensemble/member_01.safetensors")).unwrap()
    );
    // A flag that contradicts the stored ensemble names itself and both values; nothing changes.
    let before = snapshot(&copy);
    for (flags, named) in [
        (vec!["--hidden", "16,16"], "--hidden"),
        (vec!["--seed", "6"], "--seed"),
        (vec!["--members", "3"], "--members"),
        (vec!["--dataset", "concrete"], "--dataset"),
    ] {
        let o = bnn()
            .arg("sample")
            .args(&flags)
            .args(["--warmup", "20", "--draws", "30", "--out"])
            .arg(&copy)
            .output()
            .unwrap();
        let message = stderr(&o);
        assert!(!o.status.success(), "{flags:?} was accepted");
        assert!(
            message.contains(named) && message.contains("was trained with"),
            "{flags:?}: {message}"
        );
    }
    assert_eq!(snapshot(&copy), before);
    // The stored values given again are no contradiction.
    let o = bnn()
        .args([
            "sample",
            "--hidden",
            "8,8",
            "--seed",
            "5",
            "--warmup",
            "20",
            "--draws",
            "30",
            "--max-depth",
            "5",
            "--threads",
            "1",
            "--out",
        ])
        .arg(&copy)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(trained.join("draws_chain_0.csv")).unwrap(),
        std::fs::read(copy.join("draws_chain_0.csv")).unwrap()
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

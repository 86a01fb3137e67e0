//! Sharded runs (`bnn run --shard i/n` + `bnn merge`) on real processes: the merge equals one
//! machine's run byte for byte, a shard stopped by SIGTERM checkpoints, exits 75 and resumes to
//! the same bytes, and mismatched, incomplete or overlapping shards are refused with nothing
//! overwritten.

#[path = "support/run_dirs.rs"]
mod run_dirs;

use run_dirs::{assert_same_run, bnn, run_args, temp_dir, LONG_RUN};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn run(args: &[String]) -> std::process::Output {
    bnn().args(args).output().expect("bnn starts")
}

fn merge(out: &Path, shards: &[&Path]) -> std::process::Output {
    let mut command = bnn();
    command.arg("merge").arg("--out").arg(out).args(shards);
    command.output().expect("bnn starts")
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn three_shards_merge_to_the_single_machine_run() {
    let root = temp_dir("three");
    let full = root.join("full");
    assert!(run(&run_args(&full, &["--no-shard"])).status.success());
    let shards: Vec<_> = (0..3).map(|i| root.join(format!("shard_{i}"))).collect();
    for (i, dir) in shards.iter().enumerate() {
        let o = run(&run_args(dir, &["--shard", &format!("{i}/3")]));
        assert!(o.status.success(), "shard {i}: {}", stderr(&o));
        assert!(
            !dir.join("summary.json").exists(),
            "a shard leaves evaluation to the merge"
        );
    }
    // Shard 0 of 3 with 4 chains runs chains 0 and 3 and trains members 0 and 3 only.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shards[0].join("shard.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["chains"], serde_json::json!([0, 3]));
    assert_eq!(manifest["members"], serde_json::json!([0, 3]));
    assert!(
        !shards[0].join("draws_chain_1.csv").exists()
            && !shards[0].join("ensemble/member_01.safetensors").exists()
    );

    let merged = root.join("merged");
    let refs: Vec<&Path> = shards.iter().map(|p| p.as_path()).collect();
    let o = merge(&merged, &refs);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_same_run(&full, &merged);

    // Refusals: a missing shard, a shard given twice, a shard of another config, a non-empty
    // output directory. None of them writes anything.
    let o = merge(&root.join("m1"), &refs[..2]);
    assert!(
        !o.status.success() && stderr(&o).contains("chains [2] are in none"),
        "{}",
        stderr(&o)
    );
    let o = merge(&root.join("m2"), &[refs[0], refs[1], refs[2], refs[1]]);
    assert!(
        !o.status.success() && stderr(&o).contains("chain 1 is in both"),
        "{}",
        stderr(&o)
    );
    let other = root.join("other_seed_shard_2");
    assert!(run(&run_args(&other, &["--shard", "2/3", "--seed", "9"]))
        .status
        .success());
    let o = merge(&root.join("m3"), &[refs[0], refs[1], &other]);
    assert!(
        !o.status.success() && stderr(&o).contains("different configurations"),
        "{}",
        stderr(&o)
    );
    for name in ["m1", "m2", "m3"] {
        assert!(!root.join(name).exists(), "{name} was written");
    }
    let before = std::fs::read(merged.join("summary.json")).unwrap();
    let o = merge(&merged, &refs);
    assert!(
        !o.status.success() && stderr(&o).contains("not empty"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(merged.join("summary.json")).unwrap(), before);
    let o = merge(&root.join("m4"), &[&full]);
    assert!(
        !o.status.success() && stderr(&o).contains("not a shard directory"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_terminated_shard_checkpoints_exits_75_and_resumes_to_the_same_bytes() {
    let root = temp_dir("term");
    let full = root.join("full");
    let long = LONG_RUN;
    assert!(
        run(&run_args(&full, &[&["--no-shard"][..], &long].concat()))
            .status
            .success()
    );
    let shards: Vec<_> = (0..2).map(|i| root.join(format!("shard_{i}"))).collect();
    assert!(run(&run_args(
        &shards[0],
        &[&["--shard", "0/2"][..], &long].concat()
    ))
    .status
    .success());

    // Shard 1 gets SIGTERM once its chain has passed iteration 20.
    let args = run_args(&shards[1], &[&["--shard", "1/2"][..], &long].concat());
    let child = bnn()
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let checkpoint = shards[1].join("checkpoints/chain_1.json");
    let start = Instant::now();
    loop {
        let iteration = std::fs::read_to_string(&checkpoint)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["state"]["iteration"].as_u64());
        if iteration.is_some_and(|i| i >= 20) || start.elapsed() > Duration::from_secs(120) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(75),
        "SIGTERM gives the requeue code: {}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("SIGTERM"), "{}", stderr(&o));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shards[1].join("shard.json")).unwrap())
            .unwrap();
    assert!(
        manifest["finished"].is_null(),
        "an interrupted shard is not finished"
    );
    let merged = root.join("merged");
    let o = merge(&merged, &[&shards[0], &shards[1]]);
    assert!(
        !o.status.success() && stderr(&o).contains("has not finished"),
        "{}",
        stderr(&o)
    );

    // The requeued task runs the same command and continues from the checkpoint.
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = merge(&merged, &[&shards[0], &shards[1]]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_same_run(&full, &merged);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn the_scheduler_environment_picks_the_shard_and_a_flag_wins() {
    let root = temp_dir("env");
    let dir = root.join("task");
    let o = bnn()
        .args(run_args(&dir, &[]))
        .env("SLURM_ARRAY_TASK_ID", "2")
        .env("SLURM_ARRAY_TASK_COUNT", "2")
        .env("SLURM_ARRAY_TASK_MIN", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("shard.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["shard"],
        serde_json::json!({ "index": 1, "count": 2 })
    );
    let pod = root.join("pod");
    let o = bnn()
        .args(run_args(&pod, &["--shard", "0/2"]))
        .env("JOB_COMPLETION_INDEX", "1")
        .env("BNN_SHARD_COUNT", "2")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(pod.join("shard.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["shard"]["index"], 0,
        "the explicit flag wins over the environment"
    );
    let o = bnn()
        .args(run_args(&root.join("bad"), &[]))
        .env("JOB_COMPLETION_INDEX", "1")
        .output()
        .unwrap();
    assert!(
        !o.status.success() && stderr(&o).contains("BNN_SHARD_COUNT"),
        "{}",
        stderr(&o)
    );
    let o = bnn()
        .args(run_args(&root.join("bad2"), &["--shard", "3/3"]))
        .output()
        .unwrap();
    assert!(
        !o.status.success() && stderr(&o).contains("does not exist"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&root);
}

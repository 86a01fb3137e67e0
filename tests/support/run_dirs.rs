//! Helpers shared by the cluster tests: the binary, scratch directories, a small run's flags and the run-directory comparison.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn bnn() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bnn"))
}

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bnn-cluster-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `bnn run` of a 4-member DEI-MCMC on cos(2x) (a second or two), into `out`, with `extra`
/// flags, which replace the defaults they name (warmup 30, draws 40, tree depth 5).
pub fn run_args(out: &Path, extra: &[&str]) -> Vec<String> {
    let defaults = [
        ("--dataset", "cos2x"),
        ("--hidden", "8"),
        ("--activation", "tanh"),
        ("--members", "4"),
        ("--epochs", "200"),
        ("--learning-rate", "0.01"),
        ("--max-depth", "5"),
        ("--threads", "1"),
        ("--warmup", "30"),
        ("--draws", "40"),
    ];
    let mut args = vec!["run".to_string()];
    for (flag, value) in defaults {
        if !extra.contains(&flag) {
            args.extend([flag.to_string(), value.to_string()]);
        }
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--out".to_string(), out.to_str().unwrap().to_string()]);
    args
}

/// Flags of a run long enough (seconds per chain) for a signal to land in the middle of it,
/// checkpointing every 2 iterations.
pub const LONG_RUN: [&str; 8] = [
    "--warmup",
    "60",
    "--draws",
    "1000",
    "--max-depth",
    "8",
    "--checkpoint-every",
    "2",
];

/// The files of one run that must be the same bytes in `expected` and `got`, and summary.json
/// equal but for its wall times.
pub fn assert_same_run(expected: &Path, got: &Path) {
    let mut compared = 0;
    for entry in std::fs::read_dir(expected).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let exact = name.starts_with("draws_chain_")
            || name.starts_with("adaptation_chain_")
            || [
                "config.toml",
                "layout.json",
                "predictions.csv",
                "cumulative_lppd.csv",
                "diagnostics.json",
                "train.csv",
            ]
            .contains(&name.as_str());
        if exact {
            let (a, b) = (
                std::fs::read(expected.join(&name)).unwrap(),
                std::fs::read(got.join(&name)).unwrap_or_default(),
            );
            assert!(
                a == b,
                "{name} differs between {} and {}",
                expected.display(),
                got.display()
            );
            compared += 1;
        }
    }
    assert!(compared >= 10, "only {compared} files compared");
    let summary = |dir: &Path| -> serde_json::Value {
        let mut value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap())
                .unwrap();
        strip_seconds(&mut value);
        value
    };
    assert_eq!(summary(expected), summary(got), "summary metrics differ");
}

fn strip_seconds(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|k, _| !k.contains("seconds"));
            map.values_mut().for_each(strip_seconds);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_seconds),
        _ => {}
    }
}

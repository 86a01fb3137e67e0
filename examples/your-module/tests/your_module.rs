//! The example as a user runs it: NUTS and MCLMC on their own module into run directories that
//! `bnn diagnose`, `bnn plot` and ArviZ read, and a run killed with SIGKILL that, run again,
//! ends with the bytes of an uninterrupted one.

use burn_bnn::burn::config::Config;
use burn_bnn::prelude::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("your-module-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A small config: 2 members, a short warmup, checkpoints every 10 iterations.
fn quick_config(dir: &Path, name: &str, kernel: Kernel) -> PathBuf {
    let (algorithm, warmup, draws, thin) = match kernel {
        Kernel::Nuts => (NutsConfig::new().with_max_tree_depth(7).into(), 150, 100, 1),
        Kernel::Mclmc => (MclmcConfig::new().into(), 2000, 1000, 10),
    };
    let config = ModuleRunConfig::new()
        .with_members(2)
        .with_ensemble(MapEnsembleConfig::new().with_steps(600))
        .with_sampler(
            SamplerSection::new()
                .with_algorithm(algorithm)
                .with_warmup(warmup)
                .with_draws(draws)
                .with_thin(thin)
                .with_seed(3)
                .with_checkpoint_every(10),
        );
    let path = dir.join(name);
    config.save(&path).unwrap();
    path
}

enum Kernel {
    Nuts,
    Mclmc,
}

fn example(out: &Path, config: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_your-module"));
    command.arg(out).arg(config);
    command
}

fn run_example(out: &Path, config: &Path) -> Output {
    let output = example(out, config).output().unwrap();
    assert!(
        output.status.success(),
        "your-module failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The `bnn` binary of this build (`cargo test --workspace` builds it for bnn-cli's tests).
fn bnn() -> Command {
    let deps = std::env::current_exe().unwrap();
    let bin = deps
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join(format!("bnn{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: run the workspace's tests (`cargo test --release --workspace`), which build it",
        bin.display()
    );
    Command::new(bin)
}

fn test_lppd(output: &Output) -> f64 {
    let text = String::from_utf8_lossy(&output.stdout);
    let value = text
        .split("test LPPD ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no test LPPD in {text}"));
    value.parse().unwrap()
}

#[test]
fn nuts_and_mclmc_on_your_module_are_read_by_diagnose_plot_and_arviz() {
    let root = temp_dir("samplers");
    for (name, kernel) in [("nuts", Kernel::Nuts), ("mclmc", Kernel::Mclmc)] {
        let config = quick_config(&root, &format!("{name}.json"), kernel);
        let out = root.join(name);
        let output = run_example(&out, &config);
        // cos2x with noise sd 0.1: a fit near the truth has a test LPPD near
        // log N(0; 0, 0.1²) ≈ 1.38 per point; a prior-like fit is far below 0.
        let lppd = test_lppd(&output);
        assert!(lppd > 0.5, "{name}: test LPPD {lppd} (a poor fit)");
        for chain in 0..2 {
            assert!(out.join(format!("draws_chain_{chain}.csv")).is_file());
        }
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        assert!(summary["rhat_test_loglik"].as_f64().is_some(), "{summary}");

        let diagnose = bnn().arg("diagnose").arg(&out).output().unwrap();
        let text = String::from_utf8_lossy(&diagnose.stdout);
        assert!(
            diagnose.status.success(),
            "{}",
            String::from_utf8_lossy(&diagnose.stderr)
        );
        assert!(text.contains("2 chains x 100 draws"), "{text}");
        assert!(text.contains("l1_weight"), "{text}");

        let plot = bnn().arg("plot").arg(&out).output().unwrap();
        assert!(
            plot.status.success(),
            "{}",
            String::from_utf8_lossy(&plot.stderr)
        );
        let traces = std::fs::read_dir(out.join("plots"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("trace")
            })
            .count();
        assert!(traces > 0, "bnn plot wrote no trace plot");
        arviz_reads(&out);
    }
}

/// `arviz.from_cmdstan` reads the draws with the module's tensors as variables; skipped where
/// no Python with ArviZ exists, unless `BNN_REQUIRE_ARVIZ` is set (CI installs one).
fn arviz_reads(dir: &Path) {
    let python = std::env::var("BNN_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_arviz = Command::new(&python)
        .args(["-c", "import arviz"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_arviz {
        assert!(
            std::env::var_os("BNN_REQUIRE_ARVIZ").is_none(),
            "BNN_REQUIRE_ARVIZ is set but {python} cannot import arviz"
        );
        eprintln!("skipping the ArviZ check: {python} cannot import arviz");
        return;
    }
    let script = format!(
        "import arviz, glob\n\
         idata = arviz.from_cmdstan(sorted(glob.glob('{}/draws_chain_*.csv')))\n\
         print(list(idata.posterior['l2_weight'].shape), 'lp' in idata.sample_stats and 'diverging' in idata.sample_stats)",
        dir.display()
    );
    let output = Command::new(&python)
        .args(["-c", &script])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(text.trim(), "[2, 100, 16, 16] True");
}

fn checkpointed(dir: &Path) -> bool {
    dir.join("checkpoints/chain_0.json").exists() && dir.join("checkpoints/chain_1.json").exists()
}

fn kill_when_checkpointed(mut child: Child, dir: &Path) {
    let start = Instant::now();
    while !checkpointed(dir) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before its first checkpoint"
        );
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "no checkpoint after 10 minutes"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the run should have been killed, it ended with {status}"
    );
}

fn run_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut names = vec![
        "ensemble/members.json".to_string(),
        "module_run.json".into(),
    ];
    for chain in 0..2 {
        names.push(format!("draws_chain_{chain}.csv"));
        names.push(format!("adaptation_chain_{chain}.csv"));
    }
    names
        .into_iter()
        .map(|name| {
            let mut bytes = std::fs::read(dir.join(&name)).unwrap_or_default();
            if name.ends_with("members.json") {
                // Training time is the one thing that differs between runs.
                let mut value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                value["seconds"] = serde_json::json!(0);
                bytes = value.to_string().into_bytes();
            }
            (name, bytes)
        })
        .collect()
}

#[test]
fn a_killed_run_of_your_module_continues_to_the_uninterrupted_bytes() {
    let root = temp_dir("kill");
    let config = quick_config(&root, "nuts.json", Kernel::Nuts);
    let reference = root.join("reference");
    run_example(&reference, &config);

    let killed = root.join("killed");
    let child = example(&killed, &config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    kill_when_checkpointed(child, &killed);
    // Killed during the warmup: the draws so far are shorter than the reference's.
    let partial = std::fs::read(killed.join("draws_chain_0.csv")).unwrap_or_default();
    let full = std::fs::read(reference.join("draws_chain_0.csv")).unwrap();
    assert!(
        partial.len() < full.len(),
        "the kill came too late to test anything"
    );

    run_example(&killed, &config);
    for ((name, want), (_, got)) in run_files(&reference).iter().zip(run_files(&killed)) {
        assert!(!want.is_empty(), "{name} of the reference run is empty");
        assert!(*want == got, "{name} differs after the kill and rerun");
    }
}

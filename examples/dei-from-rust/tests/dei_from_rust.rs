//! Both examples at small sizes: the library's pipeline on in-memory rows beats the linear
//! model, the user-module ensemble climbs the posterior and its chains track the function; and
//! the binary the README runs works.

use dei_from_rust::{in_memory_run, user_module_run, Sizes};
use std::process::Command;

#[test]
fn the_pipeline_runs_on_rows_held_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let stages = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = stages.clone();
    let s = in_memory_run(dir.path(), Sizes::quick(), move |m| {
        seen.lock().unwrap().push(m.to_string())
    })
    .unwrap();
    // sin(3x) + x/2 is far from a line: the BNN must fit it better than the linear model does.
    assert!(
        s.rmse < 0.5 && s.rmse < s.lm_rmse.unwrap(),
        "rmse {} vs linear {:?}",
        s.rmse,
        s.lm_rmse
    );
    assert!(
        s.lppd > s.lm_lppd.unwrap(),
        "lppd {} vs linear {:?}",
        s.lppd,
        s.lm_lppd
    );
    assert_eq!(
        (s.dataset.as_str(), s.members, s.chains),
        ("sine-trend", Some(2), 2)
    );
    for file in [
        "config.toml",
        "draws_chain_1.csv",
        "predictions.csv",
        "summary.json",
        "diagnostics.json",
    ] {
        assert!(dir.path().join(file).is_file(), "{file}");
    }
    let stages = stages.lock().unwrap();
    assert!(
        stages.iter().any(|m| m.starts_with("training 2 members"))
            && stages.iter().any(|m| m.starts_with("sampled in")),
        "{stages:?}"
    );
}

#[test]
fn a_user_module_is_warm_started_from_a_library_trained_ensemble() {
    let m = user_module_run(Sizes::quick()).unwrap();
    assert_eq!(m.parameters, 2 + 3 * 6);
    assert!(m
        .trained_log_posterior
        .iter()
        .zip(&m.initial_log_posterior)
        .all(|(after, before)| after > before));
    for i in 0..m.grid.len() {
        // 120 points with σ = 0.1: a correct posterior's mean of f lies well within 0.25 of the
        // truth; a wrong gradient, likelihood or warm start sends it far off.
        assert!(
            (m.mean[i] - m.truth[i]).abs() < 0.25,
            "x = {}: mean {} vs truth {}",
            m.grid[i],
            m.mean[i],
            m.truth[i]
        );
    }
}

#[test]
fn the_example_binary_runs() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_dei-from-rust"))
        .args(["--quick", "--out", dir.path().join("run").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("deep ensemble:") && out.contains("ResidualRegressor"),
        "{out}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_dei-from-rust"))
        .arg("--bogus")
        .output()
        .unwrap();
    assert!(
        !o.status.success()
            && String::from_utf8_lossy(&o.stderr).contains("unknown argument --bogus")
    );
}

//! End-to-end tests of the `bnn` binary: real processes, real files, exit codes and messages.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bnn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bnn")).args(args).output().expect("the bnn binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bnn-e2e-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn data_list_and_describe() {
    let o = bnn(&["data", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for name in ["airfoil", "concrete", "protein", "cos2x", "robot-arm"] {
        assert!(text.contains(name), "{text}");
    }
    let o = bnn(&["data", "describe", "yacht"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("308"), "{}", stdout(&o));
}

#[test]
fn malformed_csv_is_a_clear_error_with_nonzero_exit() {
    let dir = temp_dir("malformed");
    let path = dir.join("bad.csv");
    std::fs::write(&path, "a,b,y\n1,2,3\n4,oops,6\n7,8,9\n").unwrap();
    let o = bnn(&["data", "describe", path.to_str().unwrap()]);
    assert!(!o.status.success());
    let message = stderr(&o);
    assert!(message.contains("line 3") && message.contains("oops"), "{message}");
    let o = bnn(&["sample", "--dataset", "no-such-dataset"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("neither a known dataset nor an existing file"), "{}", stderr(&o));
}

#[test]
fn model_info_counts_parameters() {
    let o = bnn(&["model", "info", "--features", "8", "--hidden", "16,16", "--activation", "tanh"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("total parameters: 450"), "{}", stdout(&o));
    let o = bnn(&["model", "info", "--features", "8", "--likelihood", "fixed:-1"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("positive"), "{}", stderr(&o));
}

fn read_draws(path: &Path) -> (Vec<String>, Vec<Vec<f64>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines.map(|l| l.split(',').map(|v| v.parse::<f64>().unwrap()).collect()).collect();
    (header, rows)
}

fn sample(out: &Path, threads: &str) -> Output {
    bnn(&[
        "sample", "--dataset", "cos2x", "--hidden", "8", "--activation", "tanh", "--chains", "2", "--warmup", "40",
        "--draws", "30", "--max-depth", "5", "--seed", "11", "--threads", threads, "--out", out.to_str().unwrap(),
    ])
}

#[test]
fn sample_writes_draws_and_summary_reproducibly() {
    let dir = temp_dir("sample");
    let (a, b) = (dir.join("a"), dir.join("b"));
    let o = sample(&a, "1");
    assert!(o.status.success(), "{}", stderr(&o));
    let o = sample(&b, "2");
    assert!(o.status.success(), "{}", stderr(&o));

    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(a.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["n_params"], 8 + 8 + 8 * 2 + 2);
    assert_eq!(summary["n_train"], 80);
    assert_eq!(summary["chains"], 2);
    for key in ["rmse", "lppd", "nll", "mean_accept_stat", "max_rhat", "rhat_test_loglik", "rhat_test_rmse", "pointwise_predictive_rhat_max"] {
        assert!(summary[key].as_f64().is_some_and(f64::is_finite), "{key}: {}", summary[key]);
    }
    // The fit must be informative: the standardized cos(2x) target has sd 1, noise ~0.14.
    assert!(summary["rmse"].as_f64().unwrap() < 0.6, "{}", summary["rmse"]);

    for chain in 0..2 {
        let name = format!("draws_chain_{chain}.csv");
        let (header, rows) = read_draws(&a.join(&name));
        assert_eq!(&header[..7], ["lp__", "accept_stat__", "stepsize__", "treedepth__", "n_leapfrog__", "divergent__", "energy__"]);
        assert_eq!(header.len(), 7 + 34);
        assert_eq!(header[7], "layer0_weight.1.1");
        assert_eq!(rows.len(), 30);
        assert!(rows.iter().all(|r| r.len() == header.len() && r[3] <= 5.0));
        // Same seed, different thread count: identical files.
        assert_eq!(std::fs::read(a.join(&name)).unwrap(), std::fs::read(b.join(&name)).unwrap());
    }
}

#[test]
fn bench_prints_json() {
    let dir = temp_dir("bench");
    let json = dir.join("bench.json");
    let o = bnn(&[
        "bench", "--problem", "cos2x-relu", "--chains", "1,3", "--device", "flex", "--evals", "3", "--repeats", "1", "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["n_params"], 1 * 50 + 50 + 50 + 1);
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|r| r["us_per_chain_grad"].as_f64().unwrap() > 0.0));
    let o = bnn(&["bench", "--chains", "0"]);
    assert!(!o.status.success());
}

#[test]
fn wgpu_device_samples_or_explains() {
    let dir = temp_dir("wgpu");
    let o = bnn(&[
        "sample", "--dataset", "cos2x", "--hidden", "4", "--chains", "1", "--warmup", "5", "--draws", "5", "--max-depth", "3",
        "--device", "wgpu", "--out", dir.to_str().unwrap(),
    ]);
    if o.status.success() {
        assert!(dir.join("summary.json").is_file());
    } else {
        // Only acceptable failure: no adapter at all, with the install hint.
        let message = stderr(&o);
        assert!(message.contains("no wgpu adapter"), "{message}");
        eprintln!("skipping the wgpu run: {message}");
    }
}

#[test]
fn diagnose_matches_arviz_on_a_fixture_and_reads_run_dirs() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/diagnostics");
    let fixtures = std::env::var_os("BNN_FIXTURES_DIR").map(PathBuf::from).unwrap_or(fixtures);
    let dir = temp_dir("diagnose");
    let json = dir.join("ar1.json");
    let o = bnn(&["diagnose", "--draws-csv", fixtures.join("ar1.draws.csv").to_str().unwrap(), "--json", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ours: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("ar1.expected.json")).unwrap()).unwrap();
    for (name, e) in expected["parameters"].as_object().unwrap() {
        let got = &ours["parameters"][name];
        // Tolerances of the fixtures' README: R-hat 1e-9 absolute, ESS 1e-8 relative.
        assert!((got["rhat"].as_f64().unwrap() - e["rhat"].as_f64().unwrap()).abs() < 1e-9, "{name} rhat");
        let (g, x) = (got["ess_bulk"].as_f64().unwrap(), e["ess_bulk"].as_f64().unwrap());
        assert!((g - x).abs() < 1e-8 * x, "{name} ess_bulk {g} vs {x}");
        assert_eq!(got["crhat"].as_array().unwrap().len(), 4);
    }

    let run = dir.join("run");
    let o = sample(&run, "2");
    assert!(o.status.success(), "{}", stderr(&o));
    let o = bnn(&["diagnose", run.to_str().unwrap(), "--json", dir.join("run.json").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(report["parameters"].as_object().unwrap().len(), 34 + 1); // parameters + lp__
    // A truncated chain file is refused with a message, not a panic.
    let chain1 = run.join("draws_chain_1.csv");
    let text = std::fs::read_to_string(&chain1).unwrap();
    std::fs::write(&chain1, &text[..text.len() / 2]).unwrap();
    let o = bnn(&["diagnose", run.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("draws_chain_1.csv"), "{}", stderr(&o));
}

#[test]
fn dei_mcmc_warm_start_reports_the_ensemble_baseline() {
    let dir = temp_dir("dei");
    let o = bnn(&[
        "sample", "--dataset", "cos2x", "--hidden", "8", "--activation", "tanh", "--init", "ensemble", "--members", "2",
        "--chains", "2", "--epochs", "800", "--learning-rate", "0.01", "--warmup", "30", "--draws", "30", "--max-depth", "5",
        "--out", dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["init"], "ensemble");
    assert_eq!(summary["members"], 2);
    // Trained members fit the standardized cos(2x) data far better than an untrained net (~1).
    assert!(summary["de_rmse"].as_f64().unwrap() < 0.5, "{}", summary["de_rmse"]);
    assert!(summary["de_lppd"].as_f64().is_some_and(f64::is_finite));
    let o = bnn(&["sample", "--init", "ensemble", "--epochs", "0", "--out", dir.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("at least one member and one epoch"), "{}", stderr(&o));
}

//! Reproduces Table 3 of Sommer et al. (ICML 2024), DEI-MCMC against the deep ensemble, by
//! running `bnn run` per dataset and split and writing a markdown table beside the paper's
//! numbers, and a second table per run (wall time, gradients, divergences per chain, step sizes,
//! coverage and calibration).
//!
//! ```text
//! cargo build --release -p bnn-cli
//! cargo run --release -p bnn-cli --example table3 -- --out runs/table3 [--splits 3] [--large-splits 1]
//!     [--draws 1000] [--warmup 100] [--max-depth 10] [--large-draws N] [--large-max-depth N]
//!     [--datasets airfoil,bikesharing,concrete,energy,protein,yacht] [--extra "--epochs 5000"]
//! ```
//!
//! The paper's setting (the defaults here): ReLU MLP 16-16, N(0, 1) priors on all parameters,
//! heteroscedastic Gaussian head, 12 members (Adam, 5000 full-batch epochs, weight decay 1e-2),
//! 12 NUTS chains, warmup 100, 1000 draws, target 0.8, depth 10, data standardized with
//! full-data statistics as in their code. The two large sets (bikesharing, protein) take
//! `--large-splits` splits (1 by default: one split of protein at the paper's budget is hours on
//! two cores) and may take a smaller budget (`--large-draws`, `--large-max-depth`); every row
//! of the tables names the budget its runs had. Runs already finished in `--out` are reused, so
//! the script can be stopped and started again; a reused run whose budget differs from the one
//! asked for is named on stderr and keeps its own budget in the tables. The tables go to stdout
//! and `<out>/table3.md`; what `bnn` prints goes to stderr.

mod support;

use bnn_pipeline::{AcceptanceDrift, RunConfig, RunDir};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Sommer et al. 2024, Table 3: (DEI RMSE, DEI LPPD, DE RMSE, DE LPPD).
const PAPER: [(&str, f64, f64, f64, f64); 6] = [
    ("airfoil", 0.21, 0.58, 0.24, 0.19),
    ("bikesharing", 0.25, 0.63, 0.30, 0.42),
    ("concrete", 0.31, 0.23, 0.32, -0.08),
    ("energy", 0.04, 2.06, 0.04, 1.93),
    ("protein", 0.70, -0.75, 0.77, -1.05),
    ("yacht", 0.03, 3.08, 0.03, 2.55),
];

/// The sets with over 10,000 rows: one split and optionally a smaller budget.
const LARGE: [&str; 2] = ["bikesharing", "protein"];

struct Options {
    out: PathBuf,
    splits: u64,
    large_splits: u64,
    draws: String,
    warmup: String,
    max_depth: String,
    large_draws: Option<String>,
    large_max_depth: Option<String>,
    datasets: Vec<String>,
    extra: Vec<String>,
}

impl Options {
    fn is_large(dataset: &str) -> bool {
        LARGE.contains(&dataset)
    }
    fn splits_for(&self, dataset: &str) -> u64 {
        if Self::is_large(dataset) {
            self.large_splits
        } else {
            self.splits
        }
    }
    /// (warmup, draws, max depth) asked for this dataset.
    fn budget_for(&self, dataset: &str) -> (String, String, String) {
        let large = Self::is_large(dataset);
        let pick = |general: &String, large_value: &Option<String>| match large_value {
            Some(v) if large => v.clone(),
            _ => general.clone(),
        };
        (
            self.warmup.clone(),
            pick(&self.draws, &self.large_draws),
            pick(&self.max_depth, &self.large_max_depth),
        )
    }
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        out: PathBuf::from("runs/table3"),
        splits: 3,
        large_splits: 1,
        draws: "1000".into(),
        warmup: "100".into(),
        max_depth: "10".into(),
        large_draws: None,
        large_max_depth: None,
        datasets: PAPER.iter().map(|p| p.0.to_string()).collect(),
        extra: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        let whole = |v: String, flag: &str| {
            v.parse::<u64>()
                .map(|_| v.clone())
                .map_err(|_| format!("{flag} takes a whole number, not {v:?}"))
        };
        match flag.as_str() {
            "--out" => o.out = PathBuf::from(value()?),
            "--splits" => o.splits = value()?.parse().map_err(|_| "--splits takes a number")?,
            "--large-splits" => {
                o.large_splits = value()?
                    .parse()
                    .map_err(|_| "--large-splits takes a number")?
            }
            "--draws" => o.draws = whole(value()?, &flag)?,
            "--warmup" => o.warmup = whole(value()?, &flag)?,
            "--max-depth" => o.max_depth = whole(value()?, &flag)?,
            "--large-draws" => o.large_draws = Some(whole(value()?, &flag)?),
            "--large-max-depth" => o.large_max_depth = Some(whole(value()?, &flag)?),
            "--datasets" => o.datasets = value()?.split(',').map(String::from).collect(),
            "--extra" => o.extra = value()?.split_whitespace().map(String::from).collect(),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if let Some(unknown) = o
        .datasets
        .iter()
        .find(|d| !PAPER.iter().any(|p| p.0 == d.as_str()))
    {
        return Err(format!("--datasets: {unknown} is not in Table 3 (airfoil, bikesharing, concrete, energy, protein, yacht)"));
    }
    Ok(o)
}

/// One finished run: its summary, its config and what its draw files say per chain.
struct Run {
    dataset: String,
    split: u64,
    summary: serde_json::Value,
    config: RunConfig,
    chains: Vec<ChainStats>,
}

/// Per-chain sampler statistics from `draws_chain_<k>.csv` (the Stan columns).
struct ChainStats {
    draws: usize,
    divergent: usize,
    accept: f64,
    step_size: f64,
    /// (acceptance statistic, divergent) per draw.
    transitions: Vec<(f64, bool)>,
}

fn main() {
    let (o, bnn) = support::options_and_binary(parse());
    let mut runs = Vec::new();
    for dataset in &o.datasets {
        let (warmup, draws, max_depth) = o.budget_for(dataset);
        for split in 0..o.splits_for(dataset) {
            let dir = o.out.join(format!("{dataset}-split{split}"));
            if read_summary(&dir).is_none() && dir.join("draws_chain_0.csv").exists() {
                finish_interrupted(&bnn, &dir);
            }
            if read_summary(&dir).is_none() {
                let split_seed = split.to_string();
                let mut args: Vec<&str> = vec![
                    "run",
                    "--dataset",
                    dataset,
                    "--split-seed",
                    &split_seed,
                    "--hidden",
                    "16,16",
                    "--activation",
                    "relu",
                    "--likelihood",
                    "hetero",
                    "--prior",
                    "normal:1",
                    "--members",
                    "12",
                    "--chains",
                    "12",
                    "--warmup",
                    &warmup,
                    "--draws",
                    &draws,
                    "--max-depth",
                    &max_depth,
                    "--standardize",
                    "full",
                    "--seed",
                    &split_seed,
                ];
                args.extend(o.extra.iter().map(String::as_str));
                let out = dir.to_string_lossy().into_owned();
                args.extend(["--out", &out]);
                eprintln!("== {dataset} split {split}: bnn {}", args.join(" "));
                let status = Command::new(&bnn)
                    .args(&args)
                    .stdout(std::io::stderr())
                    .status()
                    .expect("bnn runs");
                if !status.success() {
                    eprintln!("error: the run for {dataset} split {split} failed; its directory is kept for inspection");
                    std::process::exit(1);
                }
            }
            let run = read_run(dataset, split, &dir).unwrap_or_else(|e| {
                eprintln!("error: {}: {e}", dir.display());
                std::process::exit(1);
            });
            let s = &run.config.sampler;
            if (
                s.warmup.to_string(),
                s.draws.to_string(),
                s.max_depth.to_string(),
            ) != (warmup.clone(), draws.clone(), max_depth.clone())
            {
                eprintln!(
                    "note: reusing {} with its own budget ({} + {}, depth {}), not the one asked for ({warmup} + {draws}, depth {max_depth})",
                    dir.display(),
                    s.warmup,
                    s.draws,
                    s.max_depth
                );
            }
            runs.push(run);
        }
    }
    let table = format!("{}\n{}", dataset_table(&o, &runs), run_table(&runs));
    let path = o.out.join("table3.md");
    std::fs::write(&path, &table).expect("writing the table");
    print!("{table}");
    eprintln!("wrote {}", path.display());
}

/// A run stopped after sampling began but before its summary (killed, machine gone): `bnn sample
/// --resume` continues the chains from their checkpoints, then `predict`, `evaluate` and
/// `diagnose` finish it. (A run stopped earlier is started again by `bnn run`, which reuses the
/// members it saved.)
fn finish_interrupted(bnn: &Path, dir: &Path) {
    let out = dir.to_string_lossy().into_owned();
    let diagnostics = dir.join("diagnostics.json").to_string_lossy().into_owned();
    for args in [
        vec!["sample", "--resume", &out],
        vec!["predict", &out],
        vec!["evaluate", &out],
        vec!["diagnose", &out, "--json", &diagnostics],
    ] {
        eprintln!("== continuing {out}: bnn {}", args.join(" "));
        let status = Command::new(bnn)
            .args(&args)
            .stdout(std::io::stderr())
            .status()
            .expect("bnn runs");
        if !status.success() {
            eprintln!(
                "error: `bnn {}` failed; the directory is kept for inspection",
                args.join(" ")
            );
            std::process::exit(1);
        }
    }
}

fn read_summary(dir: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).ok()?).ok()
}

fn read_run(dataset: &str, split: u64, dir: &Path) -> Result<Run, String> {
    let summary = read_summary(dir).ok_or("no readable summary.json")?;
    let run_dir = RunDir::new(dir);
    let config = run_dir.load_config().map_err(|e| format!("{e:#}"))?;
    let chain_count = summary["chains"]
        .as_u64()
        .ok_or("summary.json has no chain count")? as usize;
    let chains = (0..chain_count)
        .map(|c| chain_stats(&run_dir.draws(c)))
        .collect::<Result<_, _>>()?;
    Ok(Run {
        dataset: dataset.to_string(),
        split,
        summary,
        config,
        chains,
    })
}

/// Reads the four Stan statistics columns of one chain's draws file.
fn chain_stats(path: &Path) -> Result<ChainStats, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or(format!("{} is empty", path.display()))?
        .split(',')
        .collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or(format!("{} has no {name} column", path.display()))
    };
    let (divergent, accept, step) = (
        column("divergent__")?,
        column("accept_stat__")?,
        column("stepsize__")?,
    );
    let last = divergent.max(accept).max(step);
    let mut stats = ChainStats {
        draws: 0,
        divergent: 0,
        accept: 0.0,
        step_size: f64::NAN,
        transitions: Vec::new(),
    };
    for line in lines.filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.splitn(last + 2, ',').collect();
        let value = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .ok_or(format!(
                    "{}: a row without a number in column {i}",
                    path.display()
                ))
        };
        let (diverged, accept) = (value(divergent)? != 0.0, value(accept)?);
        stats.draws += 1;
        stats.divergent += diverged as usize;
        stats.accept += accept;
        stats.transitions.push((accept, diverged));
        stats.step_size = value(step)?;
    }
    stats.accept /= stats.draws.max(1) as f64;
    Ok(stats)
}

fn number(v: &serde_json::Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or(f64::NAN)
}

/// `100 + 1000, depth 10` from a run's config.
fn budget(config: &RunConfig) -> String {
    format!(
        "{} + {}, depth {}",
        config.sampler.warmup, config.sampler.draws, config.sampler.max_depth
    )
}

fn dataset_table(o: &Options, runs: &[Run]) -> String {
    let mut text = String::from(
        "| dataset | splits | budget (warmup + draws per chain) | DEI RMSE | DEI LPPD | DE RMSE | DE LPPD | paper DEI RMSE | paper DEI LPPD | paper DE RMSE | paper DE LPPD | divergent draws | cov. 90% | calibration error | minutes per split |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for dataset in &o.datasets {
        let mine: Vec<&Run> = runs.iter().filter(|r| &r.dataset == dataset).collect();
        let values = |key: &str| {
            mine.iter()
                .map(|r| number(&r.summary, key))
                .collect::<Vec<f64>>()
        };
        let cell = |key: &str| mean_and_sd(&values(key));
        let paper = PAPER.iter().find(|p| p.0 == dataset);
        let p = |i: usize| {
            paper.map_or("–".to_string(), |p| {
                format!("{:.2}", [p.1, p.2, p.3, p.4][i])
            })
        };
        let minutes: Vec<f64> = mine
            .iter()
            .map(|r| run_seconds(&r.summary) / 60.0)
            .collect();
        let mut budgets: Vec<String> = mine.iter().map(|r| budget(&r.config)).collect();
        budgets.dedup();
        let divergent: usize = mine
            .iter()
            .flat_map(|r| &r.chains)
            .map(|c| c.divergent)
            .sum();
        let draws: usize = mine.iter().flat_map(|r| &r.chains).map(|c| c.draws).sum();
        text += &format!(
            "| {dataset} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {divergent} of {draws} ({:.0}%) | {} | {} | {} |\n",
            mine.len(),
            budgets.join("; "),
            cell("rmse"),
            cell("lppd"),
            cell("de_rmse"),
            cell("de_lppd"),
            p(0),
            p(1),
            p(2),
            p(3),
            100.0 * divergent as f64 / draws.max(1) as f64,
            cell("coverage_90"),
            cell("calibration_error"),
            minutes.iter().map(|m| format!("{m:.1}")).collect::<Vec<_>>().join(", "),
        );
    }
    text += &format!(
        "\nSettings: ReLU 16-16, N(0,1) priors, heteroscedastic head, 12 members, 12 NUTS chains, target 0.8, full-data standardization{}. Means ± sd over splits; RMSE and LPPD on the standardized scale; minutes are wall time per split (ensemble + warmup + sampling).\n",
        if o.extra.is_empty() { String::new() } else { format!(", extra flags `{}`", o.extra.join(" ")) }
    );
    text
}

/// One row per run: where the time went and how the chains behaved.
fn run_table(runs: &[Run]) -> String {
    let mut text = String::from(
        "| dataset | split | budget | minutes: ensemble / warmup / sampling | gradients (M) | divergent draws | chains > 50% divergent | worst chain | acceptance (min–max) | acceptance first → last tenth | step size (min–max) | cov. 90% | calibration error | DEI LPPD | DE LPPD |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let s = &r.summary;
        let divergent: usize = r.chains.iter().map(|c| c.divergent).sum();
        let draws: usize = r.chains.iter().map(|c| c.draws).sum();
        let over_half = r
            .chains
            .iter()
            .filter(|c| 2 * c.divergent > c.draws)
            .count();
        let worst = r
            .chains
            .iter()
            .max_by_key(|c| c.divergent)
            .map_or(0, |c| c.divergent);
        let range = |f: fn(&ChainStats) -> f64| {
            let values: Vec<f64> = r.chains.iter().map(f).collect();
            (
                values.iter().cloned().fold(f64::INFINITY, f64::min),
                values.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            )
        };
        let (accept_min, accept_max) = range(|c| c.accept);
        let (step_min, step_max) = range(|c| c.step_size);
        let transitions: Vec<Vec<(f64, bool)>> =
            r.chains.iter().map(|c| c.transitions.clone()).collect();
        let drift = AcceptanceDrift::of_chains(&transitions).map_or("–".to_string(), |d| {
            format!("{:.2} → {:.2}", d.accept_first_tenth, d.accept_last_tenth)
        });
        text += &format!(
            "| {} | {} | {} | {:.1} / {:.1} / {:.1} | {:.2} | {divergent} of {draws} | {over_half} | {worst} of {} | {:.2} ({accept_min:.2}–{accept_max:.2}) | {drift} | {step_min:.1e}–{step_max:.1e} | {:.3} | {:.3} | {:.3} | {:.3} |\n",
            r.dataset,
            r.split,
            budget(&r.config),
            number(s, "seconds_ensemble") / 60.0,
            number(s, "seconds_warmup") / 60.0,
            number(s, "seconds_sampling") / 60.0,
            number(s, "sampling_gradients") / 1e6,
            r.chains.first().map_or(0, |c| c.draws),
            number(s, "mean_accept_stat"),
            number(s, "coverage_90"),
            number(s, "calibration_error"),
            number(s, "lppd"),
            number(s, "de_lppd"),
        );
    }
    text
}

fn run_seconds(summary: &serde_json::Value) -> f64 {
    number(summary, "seconds_ensemble")
        + number(summary, "seconds_warmup")
        + number(summary, "seconds_sampling")
}

/// `mean ± sd` over splits (the sample sd), or the one value.
fn mean_and_sd(values: &[f64]) -> String {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n.max(1) as f64;
    if n < 2 {
        return format!("{mean:.3}");
    }
    let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    format!("{mean:.3} ± {sd:.3}")
}

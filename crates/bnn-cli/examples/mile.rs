//! MILE against DEI-NUTS from the same deep-ensemble members: runs `bnn run` twice per dataset
//! and split (the members are trained identically from the same seed, so both samplers start
//! from the same networks) and writes a markdown table of predictive quality, time and gradients.
//!
//! ```text
//! cargo build --release -p bnn-cli
//! cargo run --release -p bnn-cli --example mile -- --out runs/mile [--splits 3]
//!     [--datasets airfoil,concrete,energy,yacht] [--seeds 3] [--extra "--learning-rate 0.01"]
//! ```
//!
//! `--seeds K` runs both samplers K times per split from the same members with chain seeds
//! `split`, `100 + split`, …, `100·(K−1) + split` (one pooled LPPD moves by about ±0.1 between chain
//! seeds on energy, more than the bar): the extra runs live in `<dataset>-split<i>/seed<k>/` and
//! copy the first run's `ensemble/`, so no member is trained twice.
//!
//! Both runs use Table 3's model (ReLU 16-16, N(0, 1) priors, heteroscedastic head, 12 members,
//! 12 chains, full-data standardization). DEI-NUTS: Sommer et al. 2024's budget, 100 warmup +
//! 1000 draws, depth 10. MILE (Sommer et al. 2025): MCLMC, 50,000 tuning steps (phases
//! 0.8/0.1/0.1) + 10,000 sampling steps kept every 10th, with `bnn`'s MCLMC defaults (start
//! L = 1, diagonal preconditioner; MILE's own: add `--extra "--learning-rate 0.01
//! --trajectory-length 20 --diagonal-preconditioning false"`). Finished runs in `--out` are
//! reused.
//! Time is the sampler's (tuning + sampling, from `sampling.json`), ensemble training excluded.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

struct Options {
    out: PathBuf,
    splits: u64,
    seeds: u64,
    datasets: Vec<String>,
    extra: Vec<String>,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        out: PathBuf::from("runs/mile"),
        splits: 3,
        seeds: 1,
        datasets: ["airfoil", "concrete", "energy", "yacht"]
            .map(String::from)
            .to_vec(),
        extra: vec!["--learning-rate".into(), "0.01".into()],
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--out" => o.out = PathBuf::from(value()?),
            "--splits" => o.splits = value()?.parse().map_err(|_| "--splits takes a number")?,
            "--seeds" => {
                o.seeds = value()?
                    .parse()
                    .ok()
                    .filter(|&k| k > 0)
                    .ok_or("--seeds takes a positive number")?
            }
            "--datasets" => o.datasets = value()?.split(',').map(String::from).collect(),
            "--extra" => o.extra = value()?.split_whitespace().map(String::from).collect(),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(o)
}

/// The two samplers' flags, by the run directory's name.
const SAMPLERS: [(&str, &[&str]); 2] = [
    (
        "dei-nuts",
        &["--warmup", "100", "--draws", "1000", "--max-depth", "10"],
    ),
    (
        "mile",
        &[
            "--sampler",
            "mclmc",
            "--warmup",
            "50000",
            "--draws",
            "10000",
            "--thin",
            "10",
            "--checkpoint-every",
            "1000",
        ],
    ),
];

/// What one finished run reports.
struct Run {
    summary: serde_json::Value,
    /// Tuning + sampling seconds.
    seconds: f64,
    /// Gradient evaluations in tuning and sampling, all chains.
    gradients: f64,
}

fn read_run(dir: &Path) -> Option<Run> {
    let json = |name: &str| -> Option<serde_json::Value> {
        serde_json::from_str(&std::fs::read_to_string(dir.join(name)).ok()?).ok()
    };
    let summary = json("summary.json")?;
    let sampling = json("sampling.json")?;
    let seconds = sampling["seconds_warmup"].as_f64()? + sampling["seconds_sampling"].as_f64()?;
    let mut gradients = summary["sampling_gradients"].as_f64().unwrap_or(f64::NAN);
    for chain in 0.. {
        let Ok(text) = std::fs::read_to_string(dir.join(format!("adaptation_chain_{chain}.csv")))
        else {
            break;
        };
        let mut lines = text.lines();
        let column = lines.next()?.split(',').position(|c| c == "n_leapfrog__")?;
        gradients += lines
            .filter_map(|l| l.split(',').nth(column)?.parse::<f64>().ok())
            .sum::<f64>();
    }
    Some(Run {
        summary,
        seconds,
        gradients,
    })
}

fn main() {
    let (o, bnn) = support::options_and_binary(parse());
    let mut rows = Vec::new();
    for dataset in &o.datasets {
        for split in 0..o.splits {
            for seed_index in 0..o.seeds {
                let mut pair = Vec::new();
                for (name, flags) in SAMPLERS {
                    let split_dir = o.out.join(format!("{dataset}-split{split}"));
                    let dir = if seed_index == 0 {
                        split_dir.join(name)
                    } else {
                        split_dir.join(format!("seed{seed_index}")).join(name)
                    };
                    if read_run(&dir).is_none() {
                        if seed_index > 0 {
                            copy_members(
                                &split_dir.join(name).join("ensemble"),
                                &dir.join("ensemble"),
                            );
                        }
                        let seed = (100 * seed_index + split).to_string();
                        let split_seed = split.to_string();
                        let out = dir.to_string_lossy().into_owned();
                        let mut args: Vec<&str> = vec![
                            "run",
                            "--dataset",
                            dataset,
                            "--split-seed",
                            &split_seed,
                            "--seed",
                            &seed,
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
                            "--standardize",
                            "full",
                        ];
                        args.extend(flags);
                        args.extend(o.extra.iter().map(String::as_str));
                        args.extend(["--out", &out]);
                        eprintln!(
                            "== {dataset} split {split} chain seed {seed}, {name}: bnn {}",
                            args.join(" ")
                        );
                        let status = Command::new(&bnn).args(&args).status().expect("bnn runs");
                        if !status.success() {
                            eprintln!("error: the {name} run for {dataset} split {split} (seed {seed}) failed; its directory is kept for inspection");
                            std::process::exit(1);
                        }
                    }
                    pair.push(read_run(&dir).expect("summary after a finished run"));
                }
                let mile = pair.pop().expect("two runs");
                let nuts = pair.pop().expect("two runs");
                rows.push(Row {
                    dataset: dataset.clone(),
                    split,
                    nuts,
                    mile,
                });
            }
        }
    }
    let table = markdown(&o, &rows);
    let path = o.out.join("mile.md");
    std::fs::write(&path, &table).expect("writing the table");
    print!("{table}");
    eprintln!("wrote {}", path.display());
}

/// One (dataset, split, chain seed): both samplers from the same members.
struct Row {
    dataset: String,
    split: u64,
    nuts: Run,
    mile: Run,
}

/// Copies the first run's members so that a further chain seed samples from the same networks.
fn copy_members(from: &Path, to: &Path) {
    let copy = || -> std::io::Result<()> {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
        Ok(())
    };
    if let Err(e) = copy() {
        eprintln!(
            "error: copying the members from {} to {}: {e}",
            from.display(),
            to.display()
        );
        std::process::exit(1);
    }
}

fn markdown(o: &Options, rows: &[Row]) -> String {
    let f = |run: &Run, key: &str| run.summary[key].as_f64().unwrap_or(f64::NAN);
    let delta = |r: &Row| f(&r.mile, "lppd") - f(&r.nuts, "lppd");
    let mut text = String::from(
        "| dataset | splits × seeds | LPPD DEI-NUTS | LPPD MILE | Δ LPPD ± s.e. | RMSE DEI-NUTS | RMSE MILE | cov. 90% DEI / MILE | calib. err. DEI / MILE | R-hat test loglik DEI / MILE | minutes DEI / MILE | time MILE/DEI | gradients (M) DEI / MILE | divergences DEI |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut per_split = String::new();
    for dataset in &o.datasets {
        let mine: Vec<&Row> = rows.iter().filter(|r| &r.dataset == dataset).collect();
        let n = mine.len() as f64;
        let mean = |g: &dyn Fn(&Row) -> f64| mine.iter().map(|r| g(r)).sum::<f64>() / n;
        let both = |key: &str, digits: usize| {
            format!(
                "{:.digits$} / {:.digits$}",
                mean(&|r| f(&r.nuts, key)),
                mean(&|r| f(&r.mile, key))
            )
        };
        let minutes = (
            mean(&|r| r.nuts.seconds) / 60.0,
            mean(&|r| r.mile.seconds) / 60.0,
        );
        let mean_delta = mean(&delta);
        // Standard error of the mean paired difference over the (split, seed) runs.
        let se = if mine.len() > 1 {
            (mine
                .iter()
                .map(|r| (delta(r) - mean_delta).powi(2))
                .sum::<f64>()
                / (n - 1.0)
                / n)
                .sqrt()
        } else {
            f64::NAN
        };
        text += &format!(
            "| {dataset} | {} × {} | {:.3} | {:.3} | {:+.3} ± {:.3} | {:.3} | {:.3} | {} | {} | {} | {:.1} / {:.1} | {:.2} | {:.1} / {:.2} | {:.0} |\n",
            o.splits,
            o.seeds,
            mean(&|r| f(&r.nuts, "lppd")),
            mean(&|r| f(&r.mile, "lppd")),
            mean_delta,
            se,
            mean(&|r| f(&r.nuts, "rmse")),
            mean(&|r| f(&r.mile, "rmse")),
            both("coverage_90", 3),
            both("calibration_error", 3),
            both("rhat_test_loglik", 2),
            minutes.0,
            minutes.1,
            mean(&|r| r.mile.seconds / r.nuts.seconds),
            mean(&|r| r.nuts.gradients) / 1e6,
            mean(&|r| r.mile.gradients) / 1e6,
            mean(&|r| f(&r.nuts, "divergences")),
        );
        per_split += &format!("- {dataset}:");
        for split in 0..o.splits {
            let runs: Vec<String> = mine
                .iter()
                .filter(|r| r.split == split)
                .map(|r| {
                    format!(
                        "{:.3} / {:.3} ({:+.3}, {:.2})",
                        f(&r.nuts, "lppd"),
                        f(&r.mile, "lppd"),
                        delta(r),
                        r.mile.seconds / r.nuts.seconds
                    )
                })
                .collect();
            per_split += &format!(" split {split}: {};", runs.join(", "));
        }
        per_split.pop();
        per_split += "\n";
    }
    let seeds = if o.seeds > 1 {
        format!(" and chain seeds (split + 100·k, k < {})", o.seeds)
    } else {
        String::new()
    };
    text += &format!(
        "\nMeans over splits (split seeds 0..{}){seeds}; s.e. of the mean paired difference over those runs. Same 12 members per split for both samplers{}; LPPD and RMSE on the standardized scale; minutes: tuning + sampling, ensemble training excluded.\n\nPer run, LPPD DEI-NUTS / MILE (Δ, time MILE/DEI), in seed order:\n\n{per_split}",
        o.splits.saturating_sub(1),
        if o.extra.is_empty() { String::new() } else { format!(" (extra flags `{}`)", o.extra.join(" ")) }
    );
    text
}

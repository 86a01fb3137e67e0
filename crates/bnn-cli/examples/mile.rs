//! MILE against DEI-NUTS from the same deep-ensemble members: runs `bnn run` twice per dataset
//! and split (the members are trained identically from the same seed, so both samplers start
//! from the same networks) and writes a markdown table of predictive quality, time and gradients.
//!
//! ```text
//! cargo build --release -p bnn-cli
//! cargo run --release -p bnn-cli --example mile -- --out runs/mile [--splits 3]
//!     [--datasets airfoil,concrete,energy,yacht] [--extra "--learning-rate 0.01"]
//! ```
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
    datasets: Vec<String>,
    extra: Vec<String>,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        out: PathBuf::from("runs/mile"),
        splits: 3,
        datasets: ["airfoil", "concrete", "energy", "yacht"].map(String::from).to_vec(),
        extra: vec!["--learning-rate".into(), "0.01".into()],
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--out" => o.out = PathBuf::from(value()?),
            "--splits" => o.splits = value()?.parse().map_err(|_| "--splits takes a number")?,
            "--datasets" => o.datasets = value()?.split(',').map(String::from).collect(),
            "--extra" => o.extra = value()?.split_whitespace().map(String::from).collect(),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(o)
}

/// The two samplers' flags, by the run directory's name.
const SAMPLERS: [(&str, &[&str]); 2] = [
    ("dei-nuts", &["--warmup", "100", "--draws", "1000", "--max-depth", "10"]),
    ("mile", &["--sampler", "mclmc", "--warmup", "50000", "--draws", "10000", "--thin", "10", "--checkpoint-every", "1000"]),
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
    let json = |name: &str| -> Option<serde_json::Value> { serde_json::from_str(&std::fs::read_to_string(dir.join(name)).ok()?).ok() };
    let summary = json("summary.json")?;
    let sampling = json("sampling.json")?;
    let seconds = sampling["seconds_warmup"].as_f64()? + sampling["seconds_sampling"].as_f64()?;
    let mut gradients = summary["sampling_gradients"].as_f64().unwrap_or(f64::NAN);
    for chain in 0.. {
        let Ok(text) = std::fs::read_to_string(dir.join(format!("adaptation_chain_{chain}.csv"))) else { break };
        let mut lines = text.lines();
        let column = lines.next()?.split(',').position(|c| c == "n_leapfrog__")?;
        gradients += lines.filter_map(|l| l.split(',').nth(column)?.parse::<f64>().ok()).sum::<f64>();
    }
    Some(Run { summary, seconds, gradients })
}

fn main() {
    let (o, bnn) = support::options_and_binary(parse());
    let mut rows = Vec::new();
    for dataset in &o.datasets {
        for split in 0..o.splits {
            let mut pair = Vec::new();
            for (name, flags) in SAMPLERS {
                let dir = o.out.join(format!("{dataset}-split{split}")).join(name);
                if read_run(&dir).is_none() {
                    let seed = split.to_string();
                    let out = dir.to_string_lossy().into_owned();
                    let mut args: Vec<&str> = vec![
                        "run", "--dataset", dataset, "--split-seed", &seed, "--seed", &seed, "--hidden", "16,16", "--activation", "relu",
                        "--likelihood", "hetero", "--prior", "normal:1", "--members", "12", "--chains", "12", "--standardize", "full",
                    ];
                    args.extend(flags);
                    args.extend(o.extra.iter().map(String::as_str));
                    args.extend(["--out", &out]);
                    eprintln!("== {dataset} split {split}, {name}: bnn {}", args.join(" "));
                    let status = Command::new(&bnn).args(&args).status().expect("bnn runs");
                    if !status.success() {
                        eprintln!("error: the {name} run for {dataset} split {split} failed; its directory is kept for inspection");
                        std::process::exit(1);
                    }
                }
                pair.push(read_run(&dir).expect("summary after a finished run"));
            }
            let mile = pair.pop().expect("two runs");
            let nuts = pair.pop().expect("two runs");
            rows.push((dataset.clone(), nuts, mile));
        }
    }
    let table = markdown(&o, &rows);
    let path = o.out.join("mile.md");
    std::fs::write(&path, &table).expect("writing the table");
    print!("{table}");
    eprintln!("wrote {}", path.display());
}

fn markdown(o: &Options, rows: &[(String, Run, Run)]) -> String {
    let f = |run: &Run, key: &str| run.summary[key].as_f64().unwrap_or(f64::NAN);
    let mut text = String::from(
        "| dataset | splits | LPPD DEI-NUTS | LPPD MILE | Δ LPPD | RMSE DEI-NUTS | RMSE MILE | cov. 90% DEI / MILE | calib. err. DEI / MILE | R-hat test loglik DEI / MILE | minutes DEI / MILE | time MILE/DEI | gradients (M) DEI / MILE | divergences DEI |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for dataset in &o.datasets {
        let mine: Vec<&(String, Run, Run)> = rows.iter().filter(|r| &r.0 == dataset).collect();
        let n = mine.len() as f64;
        let mean = |g: &dyn Fn(&(String, Run, Run)) -> f64| mine.iter().map(|r| g(r)).sum::<f64>() / n;
        let both = |key: &str, digits: usize| format!("{:.digits$} / {:.digits$}", mean(&|r| f(&r.1, key)), mean(&|r| f(&r.2, key)));
        let minutes = (mean(&|r| r.1.seconds) / 60.0, mean(&|r| r.2.seconds) / 60.0);
        text += &format!(
            "| {dataset} | {} | {:.3} | {:.3} | {:+.3} | {:.3} | {:.3} | {} | {} | {} | {:.1} / {:.1} | {:.2} | {:.1} / {:.2} | {:.0} |\n",
            mine.len(),
            mean(&|r| f(&r.1, "lppd")),
            mean(&|r| f(&r.2, "lppd")),
            mean(&|r| f(&r.2, "lppd") - f(&r.1, "lppd")),
            mean(&|r| f(&r.1, "rmse")),
            mean(&|r| f(&r.2, "rmse")),
            both("coverage_90", 3),
            both("calibration_error", 3),
            both("rhat_test_loglik", 2),
            minutes.0,
            minutes.1,
            mean(&|r| r.2.seconds / r.1.seconds),
            mean(&|r| r.1.gradients) / 1e6,
            mean(&|r| r.2.gradients) / 1e6,
            mean(&|r| f(&r.1, "divergences")),
        );
    }
    text += &format!(
        "\nMeans over splits (split seeds 0..{}). Same 12 members per split for both samplers{}; LPPD and RMSE on the standardized scale; minutes: tuning + sampling, ensemble training excluded.\n",
        o.splits.saturating_sub(1),
        if o.extra.is_empty() { String::new() } else { format!(" (extra flags `{}`)", o.extra.join(" ")) }
    );
    text
}

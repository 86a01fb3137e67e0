//! Reproduces Table 3 of Sommer et al. (ICML 2024), DEI-MCMC against the deep ensemble, by
//! running `bnn run` per dataset and split and writing a markdown table beside the paper's
//! numbers.
//!
//! ```text
//! cargo build --release -p bnn-cli
//! cargo run --release -p bnn-cli --example table3 -- --out runs/table3 [--splits 3] [--draws 1000]
//!     [--warmup 100] [--max-depth 10] [--datasets airfoil,concrete,energy,yacht] [--extra "--epochs 5000"]
//! ```
//!
//! The paper's setting (the defaults here): ReLU MLP 16-16, N(0, 1) priors on all parameters,
//! heteroscedastic Gaussian head, 12 members (Adam, 5000 full-batch epochs, weight decay 1e-2),
//! 12 NUTS chains, warmup 100, 1000 draws, target 0.8, depth 10, data standardized with
//! full-data statistics as in their code. Runs already finished in `--out` are reused, so the
//! script can be stopped and started again.

mod support;

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

struct Options {
    out: PathBuf,
    splits: u64,
    draws: String,
    warmup: String,
    max_depth: String,
    datasets: Vec<String>,
    extra: Vec<String>,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        out: PathBuf::from("runs/table3"),
        splits: 3,
        draws: "1000".into(),
        warmup: "100".into(),
        max_depth: "10".into(),
        datasets: ["airfoil", "concrete", "energy", "yacht"].map(String::from).to_vec(),
        extra: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--out" => o.out = PathBuf::from(value()?),
            "--splits" => o.splits = value()?.parse().map_err(|_| "--splits takes a number")?,
            "--draws" => o.draws = value()?,
            "--warmup" => o.warmup = value()?,
            "--max-depth" => o.max_depth = value()?,
            "--datasets" => o.datasets = value()?.split(',').map(String::from).collect(),
            "--extra" => o.extra = value()?.split_whitespace().map(String::from).collect(),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(o)
}

/// The `bnn` binary built beside this example (target/<profile>/bnn).
fn read_summary(dir: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).ok()?).ok()
}

fn main() {
    let (o, bnn) = support::options_and_binary(parse());
    let mut rows = Vec::new();
    for dataset in &o.datasets {
        for split in 0..o.splits {
            let dir = o.out.join(format!("{dataset}-split{split}"));
            if read_summary(&dir).is_none() {
                let split_seed = split.to_string();
                let mut args: Vec<&str> = vec![
                    "run", "--dataset", dataset, "--split-seed", &split_seed, "--hidden", "16,16", "--activation", "relu",
                    "--likelihood", "hetero", "--prior", "normal:1", "--members", "12", "--chains", "12", "--warmup", &o.warmup,
                    "--draws", &o.draws, "--max-depth", &o.max_depth, "--standardize", "full", "--seed", &split_seed,
                ];
                args.extend(o.extra.iter().map(String::as_str));
                let out = dir.to_string_lossy().into_owned();
                args.extend(["--out", &out]);
                eprintln!("== {dataset} split {split}: bnn {}", args.join(" "));
                let status = Command::new(&bnn).args(&args).status().expect("bnn runs");
                if !status.success() {
                    eprintln!("error: the run for {dataset} split {split} failed; its directory is kept for inspection");
                    std::process::exit(1);
                }
            }
            rows.push((dataset.clone(), split, read_summary(&dir).expect("summary after a finished run")));
        }
    }
    let table = markdown(&o, &rows);
    let path = o.out.join("table3.md");
    std::fs::write(&path, &table).expect("writing the table");
    print!("{table}");
    eprintln!("wrote {}", path.display());
}

fn markdown(o: &Options, rows: &[(String, u64, serde_json::Value)]) -> String {
    let f = |v: &serde_json::Value, key: &str| v[key].as_f64().unwrap_or(f64::NAN);
    let mut text = String::from("| dataset | splits | DEI RMSE | DEI LPPD | DE RMSE | DE LPPD | paper DEI RMSE | paper DEI LPPD | paper DE RMSE | paper DE LPPD | divergences | cov. 90% | minutes |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for dataset in &o.datasets {
        let mine: Vec<&serde_json::Value> = rows.iter().filter(|r| &r.0 == dataset).map(|r| &r.2).collect();
        let mean = |key: &str| mine.iter().map(|v| f(v, key)).sum::<f64>() / mine.len() as f64;
        let sd = |key: &str| {
            let m = mean(key);
            (mine.iter().map(|v| (f(v, key) - m).powi(2)).sum::<f64>() / (mine.len().max(2) - 1) as f64).sqrt()
        };
        let cell = |key: &str| if mine.len() > 1 { format!("{:.3} ± {:.3}", mean(key), sd(key)) } else { format!("{:.3}", mean(key)) };
        let paper = PAPER.iter().find(|p| p.0 == dataset);
        let p = |i: usize| paper.map_or("–".to_string(), |p| format!("{:.2}", [p.1, p.2, p.3, p.4][i]));
        let minutes = mine.iter().map(|v| f(v, "seconds_ensemble") + f(v, "seconds_warmup") + f(v, "seconds_sampling")).sum::<f64>() / 60.0;
        let divergences: f64 = mine.iter().map(|v| f(v, "divergences")).sum();
        text += &format!(
            "| {dataset} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {divergences} | {} | {minutes:.1} |\n",
            mine.len(),
            cell("rmse"),
            cell("lppd"),
            cell("de_rmse"),
            cell("de_lppd"),
            p(0),
            p(1),
            p(2),
            p(3),
            cell("coverage_90"),
        );
    }
    text += &format!(
        "\nSettings: ReLU 16-16, N(0,1) priors, heteroscedastic head, 12 members, 12 NUTS chains, warmup {}, draws {}, max depth {}, full-data standardization{}. Means ± sd over splits; RMSE and LPPD on the standardized scale.\n",
        o.warmup,
        o.draws,
        o.max_depth,
        if o.extra.is_empty() { String::new() } else { format!(", extra flags `{}`", o.extra.join(" ")) }
    );
    text
}

//! Runs both examples and prints what they found: `cargo run --release -p dei-from-rust [-- --quick] [--out DIR]`.

use dei_from_rust::{in_memory_run, user_module_run, Sizes};
use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let mut sizes = Sizes::full();
    let mut out = PathBuf::from("runs/dei-from-rust");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => sizes = Sizes::quick(),
            "--out" => {
                out = args
                    .next()
                    .map(PathBuf::from)
                    .ok_or_else(|| anyhow::anyhow!("--out needs a directory"))?
            }
            other => anyhow::bail!("unknown argument {other}; expected --quick or --out DIR"),
        }
    }

    println!(
        "1. DEI-MCMC on rows held in memory (Vec<f32>), the built-in MLP, run directory {}",
        out.display()
    );
    let s = in_memory_run(&out, sizes, |message| eprintln!("   {message}"))?;
    println!("   posterior:     RMSE {:.4}  LPPD {:.4}", s.rmse, s.lppd);
    println!(
        "   deep ensemble: RMSE {:.4}  LPPD {:.4}",
        s.de_rmse.unwrap_or(f64::NAN),
        s.de_lppd.unwrap_or(f64::NAN)
    );
    println!(
        "   linear model:  RMSE {:.4}  LPPD {:.4}",
        s.lm_rmse.unwrap_or(f64::NAN),
        s.lm_lppd.unwrap_or(f64::NAN)
    );
    println!(
        "   coverage 90%: {:.3}, function-space R-hat (test log-lik) {:.3}",
        s.coverage_90.unwrap_or(f64::NAN),
        s.rhat_test_loglik
    );

    println!("2. DEI-MCMC on a user's own Burn module (ResidualRegressor as a ModulePosterior)");
    let m = user_module_run(sizes)?;
    println!(
        "   {} parameters; ensemble log posterior {:?} -> {:?}",
        m.parameters,
        rounded(&m.initial_log_posterior),
        rounded(&m.trained_log_posterior)
    );
    println!(
        "   {} chains x {} draws, {} divergences",
        sizes.members, sizes.draws, m.divergences
    );
    println!("   {:>6} {:>9} {:>9} {:>7}", "x", "truth", "mean", "R-hat");
    for i in 0..m.grid.len() {
        println!(
            "   {:>6.2} {:>9.4} {:>9.4} {:>7.3}",
            m.grid[i], m.truth[i], m.mean[i], m.rhat[i]
        );
    }
    Ok(())
}

fn rounded(values: &[f64]) -> Vec<f64> {
    values.iter().map(|v| (v * 10.0).round() / 10.0).collect()
}

//! Runs the custom-module example and prints the posterior predictive against the truth.

fn main() -> anyhow::Result<()> {
    let result = custom_posterior::run(8, 4, 300, 300, 7)?;
    println!(
        "ResidualRegressor with {} parameters, 4 NUTS chains x 300 draws, {} divergences",
        result.dim, result.divergences
    );
    println!(
        "{:>6} {:>10} {:>10} {:>10} {:>7}",
        "x", "cos(2x)", "mean", "sd", "R-hat"
    );
    for i in 0..result.grid.len() {
        let x = result.grid[i];
        println!(
            "{x:>6.3} {:>10.4} {:>10.4} {:>10.4} {:>7.3}",
            (2.0 * x).cos(),
            result.mean[i],
            result.sd[i],
            result.rhat[i]
        );
    }
    Ok(())
}

//! Times `summarize_all` on the workload the samplers produce: 500 parameters × 12 chains ×
//! 1000 draws (override with `-- <params> <chains> <draws>`), for fast-mixing (φ = 0.3) and
//! slowly mixing (φ = 0.97) AR(1) draws.
//!
//! `cargo run -p bnn-diagnostics --release --example summary_timing`

use bnn_diagnostics::{summarize, summarize_all};
use std::time::Instant;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("integer arguments"))
        .collect();
    let (n_params, n_chains, n_draws) = match args.as_slice() {
        [p, c, d] => (*p, *c, *d),
        _ => (500, 12, 1000),
    };
    for phi in [0.3, 0.97] {
        let parameters: Vec<Vec<Vec<f64>>> = (0..n_params)
            .map(|p| {
                (0..n_chains)
                    .map(|c| ar1((p * n_chains + c) as u64, phi, n_draws))
                    .collect()
            })
            .collect();
        let start = Instant::now();
        let summaries = summarize_all(&parameters);
        let parallel = start.elapsed();
        let start = Instant::now();
        let cpu_start = thread_cpu_seconds();
        let sequential: Vec<_> = parameters.iter().map(|p| summarize(p)).collect();
        let one_thread = start.elapsed();
        let cpu = thread_cpu_seconds()
            .zip(cpu_start)
            .map(|(end, begin)| end - begin);
        assert_eq!(summaries.len(), sequential.len());
        let mean_ess = summaries.iter().map(|s| s.ess_bulk).sum::<f64>() / n_params as f64;
        println!(
            "φ = {phi}: {n_params} params × {n_chains} chains × {n_draws} draws: summarize_all {:.3} s \
             ({} threads), one thread {:.3} s (CPU time {}); mean ess_bulk {mean_ess:.0}",
            parallel.as_secs_f64(),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            one_thread.as_secs_f64(),
            cpu.map_or("n/a".to_string(), |s| format!("{s:.3} s")),
        );
    }
}

/// CPU time of the calling thread (Linux `schedstat`, in ns), so that timings on a busy
/// machine still say how much work was done.
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(text.split_whitespace().next()?.parse::<f64>().ok()? * 1e-9)
}

/// A stationary AR(1) chain with unit variance from a SplitMix64 + Box–Muller stream.
fn ar1(seed: u64, phi: f64, n: usize) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x2545_F491_4F6C_DD1D);
    let mut uniform = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 + 0.5 / (1u64 << 53) as f64
    };
    let mut normal =
        move || (-2.0 * uniform().ln()).sqrt() * (std::f64::consts::TAU * uniform()).cos();
    let scale = (1.0 - phi * phi).sqrt();
    let mut value = normal();
    (0..n)
        .map(|_| {
            value = phi * value + scale * normal();
            value
        })
        .collect()
}

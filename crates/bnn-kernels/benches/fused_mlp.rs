//! `cargo bench -p bnn-kernels`: microseconds per value+gradient of the fused kernel alone (no
//! Burn), on the shapes of the issue-6 problems, printed as JSON lines.
//! `cargo bench -p bnn-kernels -- cos2x` runs only the problems whose name contains `cos2x`.

use bnn_kernels::{KernelActivation, KernelData, KernelHead, KernelSpec, MlpKernel, Workspace};
use std::time::Instant;

fn spec(
    widths: &[usize],
    activation: KernelActivation,
    head: KernelHead,
    targets: usize,
) -> KernelSpec {
    KernelSpec::dense(widths, activation, head, targets)
}

fn main() {
    let hetero = KernelHead::Heteroscedastic {
        softplus: false,
        sigma_min: 1e-6,
        sigma_max: 1e6,
    };
    let fixed = KernelHead::Fixed { sigma: 0.1 };
    let problems = [
        (
            "cos2x-sigmoid",
            spec(&[1, 50, 1], KernelActivation::Sigmoid, fixed, 1),
            80,
        ),
        (
            "cos2x-relu",
            spec(&[1, 50, 1], KernelActivation::Relu, fixed, 1),
            80,
        ),
        (
            "concrete",
            spec(&[8, 16, 16, 2], KernelActivation::Tanh, hetero, 1),
            824,
        ),
        (
            "yacht",
            spec(&[6, 16, 16, 2], KernelActivation::Relu, hetero, 1),
            277,
        ),
        (
            "bikesharing",
            spec(&[12, 16, 16, 2], KernelActivation::Relu, hetero, 1),
            13903,
        ),
        (
            "bikesharing-deep",
            spec(
                &[12, 8, 8, 8, 8, 8, 8, 8, 8, 8, 2],
                KernelActivation::Relu,
                hetero,
                1,
            ),
            13903,
        ),
        (
            "protein",
            spec(&[9, 16, 16, 2], KernelActivation::Relu, hetero, 1),
            36584,
        ),
        (
            "protein-fixed-sigma",
            spec(&[9, 16, 16, 1], KernelActivation::Relu, fixed, 1),
            36584,
        ),
    ];
    // Cargo passes `--bench`; other arguments filter the problems by name.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    for (name, spec, rows) in problems {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let kernel = MlpKernel::new(spec.clone()).expect("valid spec");
        let x: Vec<f32> = (0..rows * spec.d_input())
            .map(|i| ((i as f32 * 0.618034).fract() - 0.5) * 3.0)
            .collect();
        let y: Vec<f32> = (0..rows * spec.target_columns)
            .map(|i| ((i as f32 * 0.414214).fract() - 0.5) * 2.0)
            .collect();
        for chains in [1usize, 8, 64] {
            let theta: Vec<f32> = (0..chains * spec.dim)
                .map(|i| 0.3 * ((i as f32 * 0.7548777).fract() - 0.5))
                .collect();
            let mut values = vec![0.0; chains];
            let mut grads = vec![0.0f32; chains * spec.dim];
            let mut ws = Workspace::default();
            let data = KernelData { x: &x, y: &y, rows };
            let evals = (20_000 / (chains * rows / 80).max(1)).max(5);
            let mut times = Vec::new();
            for _ in 0..11 {
                let start = Instant::now();
                for _ in 0..evals {
                    kernel
                        .evaluate(data, &theta, &mut values, Some(&mut grads), &mut ws)
                        .expect("shapes match");
                }
                times.push(start.elapsed().as_secs_f64() * 1e6 / (evals * chains) as f64);
            }
            times.sort_by(f64::total_cmp);
            // The median, and the fastest repeat (robust to other work on a shared machine).
            println!(
                "{{\"problem\": \"{name}\", \"chains\": {chains}, \"us_per_chain_grad\": {:.3}, \"min_us_per_chain_grad\": {:.3}}}",
                times[times.len() / 2],
                times[0]
            );
        }
    }
}

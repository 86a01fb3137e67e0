//! Shared helpers for the model tests: devices, random data, and an independent host-side
//! f64 reference of the MLP log posterior.
#![allow(dead_code)]

use bnn_model::{Activation, BnnConfig, DeviceName, HostData, Likelihood, Prior, ScaleLink};
use burn::tensor::Device;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::f64::consts::PI;

/// The devices to test on; wgpu only where an adapter exists (the skip reason is printed).
pub fn devices() -> Vec<(DeviceName, Device)> {
    let mut out = Vec::new();
    for name in [DeviceName::Ndarray, DeviceName::Flex, DeviceName::Wgpu] {
        if let Some(d) = name.test_device("the posterior tests") {
            out.push((name, d));
        }
    }
    out
}

/// Whether the device computes f64 at full precision, transcendental functions included.
/// (The posteriors refuse f64 on wgpu, and the probe below would poison an NVIDIA device, whose
/// Vulkan compiler rejects f64 exp/tanh/log shaders.)
pub fn has_full_f64(device: &Device) -> bool {
    use burn::tensor::{DType, Tensor, TensorData};
    if bnn_model::check_dtype(device, DType::F64).is_err() {
        return false;
    }
    let x = [0.3f64, -1.7, 2.2];
    let t = Tensor::<1>::from_data(TensorData::new(x.to_vec(), [3]), (device, DType::F64));
    let got: Vec<f64> = (t.clone().tanh() + t.clone().exp() + t.abs().log())
        .into_data()
        .iter::<f64>()
        .collect();
    x.iter()
        .zip(&got)
        .all(|(x, g)| (x.tanh() + x.exp() + x.abs().ln() - g).abs() < 1e-12)
}

/// Runs `body` at this process's SIMD level and then, unless this already is such a run, the
/// whole test `test` again in a child process at each lower level the CPU has (the level is
/// fixed per process by `BNN_KERNEL_ISA`), so that one `cargo test` checks the host kernel's
/// AVX-512, AVX2 and portable builds alike.
pub fn at_every_instruction_set(test: &str, body: impl Fn()) {
    use bnn_kernels::simd::{self, Level};
    const CHILD: &str = "BNN_TEST_INSTRUCTION_SET_CHILD";
    println!("{test} at {}", bnn_kernels::instruction_set());
    body();
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    for level in [Level::Avx2Fma, Level::Portable] {
        if level >= simd::level() {
            continue;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(simd::ISA_VARIABLE, level.name())
            .env(CHILD, "1")
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{test} at {}:\n{stdout}\n{stderr}",
            level.name()
        );
        assert!(stdout.contains(&format!("{test} at {}", level.name())));
    }
}

pub fn random_data(
    rows: usize,
    x_cols: usize,
    y_cols: usize,
    likelihood: &Likelihood,
    seed: u64,
) -> HostData {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x: Vec<f64> = (0..rows * x_cols)
        .map(|_| rng.random_range(-1.5..1.5))
        .collect();
    let y: Vec<f64> = match likelihood {
        Likelihood::Categorical { classes } => (0..rows)
            .map(|_| rng.random_range(0..*classes) as f64)
            .collect(),
        _ => (0..rows * y_cols)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect(),
    };
    let y_cols = if likelihood.is_regression() {
        y_cols
    } else {
        1
    };
    HostData::new(x, rows, x_cols, y, y_cols)
}

pub fn random_theta(d: usize, scale: f64, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..d).map(|_| rng.random_range(-scale..scale)).collect()
}

pub fn all_likelihoods() -> Vec<Likelihood> {
    vec![
        Likelihood::GaussianHeteroscedastic {
            link: ScaleLink::Exp,
        },
        Likelihood::GaussianHeteroscedastic {
            link: ScaleLink::Softplus,
        },
        Likelihood::GaussianFixed { sigma: 0.1 },
        Likelihood::GaussianLearnedSigma {
            prior: bnn_model::LogSigmaPrior {
                mean: -1.0,
                sd: 0.5,
            },
        },
        Likelihood::Categorical { classes: 3 },
    ]
}

fn act(a: Activation, x: f64) -> f64 {
    match a {
        Activation::Tanh => x.tanh(),
        Activation::Relu => x.max(0.0),
        Activation::LeakyRelu => {
            if x > 0.0 {
                x
            } else {
                0.01 * x
            }
        }
        Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Activation::Silu => x / (1.0 + (-x).exp()),
        Activation::Gelu => x * 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2),
        Activation::Softplus => x.max(0.0) + (-x.abs()).exp().ln_1p(),
        Activation::TruncRelu => x.clamp(0.0, 1.0),
        Activation::Identity => x,
    }
}

/// Smallest distance of any hidden pre-activation from a kink of the activation (0 and, for
/// trunc_relu, 1); `f64::INFINITY` for smooth activations.
pub fn kink_distance(config: &BnnConfig, data: &HostData, theta: &[f64]) -> f64 {
    let mut min = f64::INFINITY;
    forward(config, data, theta, |pre| {
        if config.activation.is_piecewise_linear() {
            min = min.min(pre.abs()).min((pre - 1.0).abs());
        }
    });
    min
}

fn forward(
    config: &BnnConfig,
    data: &HostData,
    theta: &[f64],
    mut on_pre: impl FnMut(f64),
) -> Vec<Vec<f64>> {
    let widths = config.mlp().widths();
    let mut outputs = Vec::with_capacity(data.rows);
    for r in 0..data.rows {
        let mut h: Vec<f64> = data.x[r * data.x_cols..(r + 1) * data.x_cols].to_vec();
        let mut offset = 0;
        for l in 0..widths.len() - 1 {
            let (din, dout) = (widths[l], widths[l + 1]);
            let w = &theta[offset..offset + din * dout];
            let b = &theta[offset + din * dout..offset + din * dout + dout];
            offset += din * dout + dout;
            let mut next = vec![0.0; dout];
            for j in 0..dout {
                let mut s = b[j];
                for i in 0..din {
                    s += h[i] * w[i * dout + j];
                }
                if l + 2 < widths.len() {
                    on_pre(s);
                    s = act(config.activation, s);
                }
                next[j] = s;
            }
            h = next;
        }
        outputs.push(h);
    }
    outputs
}

/// log prior + log likelihood in f64, written independently of the tensor code.
pub fn reference_log_posterior(config: &BnnConfig, data: &HostData, theta: &[f64]) -> f64 {
    reference_log_prior(config, theta) + reference_log_likelihood(config, data, theta)
}

/// The log likelihood in f64 (with the learned-σ head's log-σ prior, as the model's own
/// likelihood has it).
pub fn reference_log_likelihood(config: &BnnConfig, data: &HostData, theta: &[f64]) -> f64 {
    let outputs = forward(config, data, theta, |_| {});
    let half_log_2pi = 0.5 * (2.0 * PI).ln();
    let mut ll = 0.0;
    let t = data.y_cols;
    let d_net = config.mlp().num_params();
    for (r, out) in outputs.iter().enumerate() {
        let y = &data.y[r * t..(r + 1) * t];
        match config.likelihood {
            Likelihood::GaussianHeteroscedastic { link } => {
                for k in 0..t {
                    let o = out[t + k];
                    let sd = match link {
                        ScaleLink::Exp => o.exp(),
                        ScaleLink::Softplus => (1.0 + o.exp()).ln(),
                    }
                    .clamp(1e-6, 1e6);
                    let z = (y[k] - out[k]) / sd;
                    ll += -0.5 * z * z - sd.ln() - half_log_2pi;
                }
            }
            Likelihood::GaussianFixed { sigma } => {
                for k in 0..t {
                    let z = (y[k] - out[k]) / sigma;
                    ll += -0.5 * z * z - sigma.ln() - half_log_2pi;
                }
            }
            Likelihood::GaussianLearnedSigma { .. } => {
                for k in 0..t {
                    let log_sd = theta[d_net + k];
                    let z = (y[k] - out[k]) / log_sd.exp();
                    ll += -0.5 * z * z - log_sd - half_log_2pi;
                }
            }
            Likelihood::Categorical { .. } => {
                let max = out.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let lse = max + out.iter().map(|o| (o - max).exp()).sum::<f64>().ln();
                ll += out[y[0] as usize] - lse;
            }
        }
    }
    if let Likelihood::GaussianLearnedSigma { prior } = config.likelihood {
        for log_sd in &theta[d_net..d_net + t] {
            let z = (log_sd - prior.mean) / prior.sd;
            ll += -0.5 * z * z - prior.sd.ln() - half_log_2pi;
        }
    }
    ll
}

/// The log prior of the network weights in f64, each layer under its own prior.
pub fn reference_log_prior(config: &BnnConfig, theta: &[f64]) -> f64 {
    let half_log_2pi = 0.5 * (2.0 * PI).ln();
    let widths = config.mlp().widths();
    let mut lp = 0.0;
    let mut offset = 0;
    for l in 0..widths.len() - 1 {
        let (din, dout) = (widths[l], widths[l + 1]);
        let chosen = config
            .prior
            .layers
            .iter()
            .rev()
            .find(|(i, _)| *i == l)
            .map(|(_, p)| *p);
        for (count, is_bias) in [(din * dout, false), (dout, true)] {
            let prior = match chosen {
                Some(p) if is_bias => p.bias,
                Some(p) => p.weight,
                None => config.prior.default,
            };
            for v in &theta[offset..offset + count] {
                lp += match prior {
                    Prior::Normal { scale } => {
                        -0.5 * (v / scale).powi(2) - scale.ln() - half_log_2pi
                    }
                    Prior::FanInNormal { scale } => {
                        let s = scale / (din as f64).sqrt();
                        -0.5 * (v / s).powi(2) - s.ln() - half_log_2pi
                    }
                    Prior::Laplace { scale } => -v.abs() / scale - (2.0 * scale).ln(),
                };
            }
            offset += count;
        }
    }
    lp
}

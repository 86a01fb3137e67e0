//! The built-in posterior's minibatch estimate (`LogDensity::minibatch`, what SMILE samples
//! with): `log prior + (N / B) Σ_{batch} log p(yₙ | θ)` and its gradient, per chain on its own
//! rows, through the host kernel (CPU backends) and through Burn's graph (every device; wgpu
//! where an adapter exists).
//!
//! The check is exact rather than statistical: averaged over a partition of the rows into
//! `N / B` disjoint batches, the estimates equal the full log posterior and its gradient (the
//! prior enters every estimate once, the likelihood of each row once in `N / B` of them), so a
//! wrong scale, a row gathered twice or a chain reading another's rows shows as a mismatch.

mod common;

use bnn_model::{AutodiffLogDensity, BnnConfig, GradientPath, Likelihood, MlpPosterior, PriorSpec};
use bnn_sampler::LogDensity;
use burn::tensor::DType;
use common::*;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const ROWS: usize = 60;
const BATCH: usize = 15;
const CHAINS: usize = 2;

fn likelihoods() -> Vec<Likelihood> {
    all_likelihoods()
        .into_iter()
        .filter(|l| !matches!(l, Likelihood::GaussianLearnedSigma { .. }))
        .collect()
}

#[test]
fn a_partition_of_minibatches_averages_to_the_full_posterior() {
    for (name, device) in devices() {
        let (dtype, tol) = if has_full_f64(&device) {
            (DType::F64, 1e-9)
        } else {
            (DType::F32, 2e-4)
        };
        for path in [GradientPath::Auto, GradientPath::Plain] {
            for (l, likelihood) in likelihoods().into_iter().enumerate() {
                let config = BnnConfig::new(3)
                    .with_hidden(vec![6, 4])
                    .with_n_targets(1)
                    .with_likelihood(likelihood)
                    .with_prior(PriorSpec::default());
                let data = random_data(ROWS, 3, 1, &likelihood, 300 + l as u64);
                let posterior = MlpPosterior::new(config, &data, &device, dtype)
                    .unwrap()
                    .with_gradient_path(path);
                let density = AutodiffLogDensity::new(posterior);
                let minibatch = density.minibatch().expect("the MLP has a minibatch form");
                assert_eq!(minibatch.num_rows(), ROWS);
                let d = density.dim();
                let thetas: Vec<f64> = (0..CHAINS as u64)
                    .flat_map(|c| random_theta(d, 0.7, 40 + c))
                    .collect();
                let mut full_values = vec![0.0; CHAINS];
                let mut full_gradients = vec![0.0; CHAINS * d];
                density
                    .log_density_and_gradient(&thetas, &mut full_values, &mut full_gradients)
                    .unwrap();
                // Each chain its own shuffled partition into ROWS / BATCH batches.
                let mut rng = ChaCha8Rng::seed_from_u64(7 + l as u64);
                let orders: Vec<Vec<usize>> = (0..CHAINS)
                    .map(|_| {
                        let mut order: Vec<usize> = (0..ROWS).collect();
                        order.shuffle(&mut rng);
                        order
                    })
                    .collect();
                let batches = ROWS / BATCH;
                let mut mean_values = [0.0; CHAINS];
                let mut mean_gradients = vec![0.0; CHAINS * d];
                for k in 0..batches {
                    let rows: Vec<usize> = orders
                        .iter()
                        .flat_map(|o| o[k * BATCH..(k + 1) * BATCH].iter().copied())
                        .collect();
                    let mut values = vec![0.0; CHAINS];
                    let mut gradients = vec![0.0; CHAINS * d];
                    minibatch
                        .minibatch_log_density(&rows, &thetas, &mut values, Some(&mut gradients))
                        .unwrap();
                    let mut alone = vec![0.0; CHAINS];
                    minibatch
                        .minibatch_log_density(&rows, &thetas, &mut alone, None)
                        .unwrap();
                    for c in 0..CHAINS {
                        assert!(
                            (alone[c] - values[c]).abs() <= tol * values[c].abs().max(1.0),
                            "{name} {path:?} {likelihood:?}: value alone {} vs with gradient {}",
                            alone[c],
                            values[c]
                        );
                    }
                    for (m, v) in mean_values.iter_mut().zip(&values) {
                        *m += v / batches as f64;
                    }
                    for (m, g) in mean_gradients.iter_mut().zip(&gradients) {
                        *m += g / batches as f64;
                    }
                }
                for c in 0..CHAINS {
                    let what = format!("{name} {path:?} {dtype:?} {likelihood:?} chain {c}");
                    let (full, mean) = (full_values[c], mean_values[c]);
                    assert!(
                        (full - mean).abs() <= tol * full.abs().max(1.0),
                        "{what}: mean of the batches' values {mean} vs full {full}"
                    );
                    let g = &full_gradients[c * d..(c + 1) * d];
                    let m = &mean_gradients[c * d..(c + 1) * d];
                    let scale = g.iter().fold(1.0f64, |a, x| a.max(x.abs()));
                    let worst = g
                        .iter()
                        .zip(m)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0, f64::max);
                    assert!(
                        worst <= tol * scale,
                        "{what}: mean of the batches' gradients off by {worst:e} (scale {scale})"
                    );
                }
            }
        }
    }
}

/// The learned-σ head keeps the prior on log σ inside its likelihood term, which a minibatch
/// would scale: it offers no minibatch form (and SMILE refuses it by name).
#[test]
fn the_learned_sigma_head_has_no_minibatch_form() {
    let likelihood = all_likelihoods()
        .into_iter()
        .find(|l| matches!(l, Likelihood::GaussianLearnedSigma { .. }))
        .unwrap();
    let config = BnnConfig::new(2)
        .with_hidden(vec![3])
        .with_n_targets(1)
        .with_likelihood(likelihood);
    let data = random_data(10, 2, 1, &likelihood, 1);
    let device = bnn_model::DeviceName::Flex.device().unwrap();
    let density =
        AutodiffLogDensity::new(MlpPosterior::new(config, &data, &device, DType::F64).unwrap());
    assert!(density.minibatch().is_none());
}

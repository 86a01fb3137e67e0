//! Manifold stochastic dynamics on a toy whose metric moves with θ: the kernel through the
//! sampler (dual averaging, threads, refusals), the bare transition's momentum flip, the
//! generalized leapfrog's reversibility, volume preservation and order, the frozen-metric
//! variant's measured bias, and the exact chain's moments.

use bnn_numerics::{Cholesky, MetricFactor};
use bnn_sampler::metric::riemannian::MetricAt;
use bnn_sampler::{
    msd_transition, LogDensity, LogDensityError, MsdConfig, MsdParams, MsdState, RiemannianDensity,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// N(0, diag(1, 4)) under the metric G(θ) = diag(1 + θ₁², 1 + θ₂²/2): any positive metric
/// leaves an exact sampler's target alone, and this one moves with θ in both coordinates.
struct Toy;

impl Toy {
    fn metric_diagonal(position: &[f64]) -> ([f64; 2], [f64; 2]) {
        (
            [
                1.0 + position[0] * position[0],
                1.0 + 0.5 * position[1] * position[1],
            ],
            [2.0 * position[0], position[1]],
        )
    }
}

impl RiemannianDensity for Toy {
    fn dim(&self) -> usize {
        2
    }

    /// `log p = −U`, `U = ½ (θ₁² + θ₂²/4)`, negated from `U` so that the numbers are those
    /// of the potential (negation is exact).
    fn evaluate(&self, position: &[f64], gradient: &mut [f64]) -> Result<f64, LogDensityError> {
        gradient[0] = -position[0];
        gradient[1] = -(position[1] / 4.0);
        Ok(-(0.5 * (position[0] * position[0] + position[1] * position[1] / 4.0)))
    }

    fn metric_at(&self, position: &[f64]) -> Result<MetricAt, LogDensityError> {
        let (g, _) = Self::metric_diagonal(position);
        let metric = MetricFactor::Dense(
            Cholesky::new(&[g[0], 0.0, 0.0, g[1]], 2)
                .map_err(|e| LogDensityError::recoverable(e.to_string()))?,
        );
        Ok(MetricAt {
            metric,
            cache: Box::new(position.to_vec()),
        })
    }

    fn log_det_gradient(&self, point: &MetricAt) -> Result<Vec<f64>, LogDensityError> {
        let position = point.cache.downcast_ref::<Vec<f64>>().unwrap();
        let (g, dg) = Self::metric_diagonal(position);
        Ok((0..2).map(|i| 0.5 * dg[i] / g[i]).collect())
    }

    fn kinetic_gradient(
        &self,
        point: &MetricAt,
        velocity: &[f64],
    ) -> Result<Vec<f64>, LogDensityError> {
        // −½ uᵀ ∂_i G u with G diagonal: −½ u_i² ∂_i G_ii.
        let position = point.cache.downcast_ref::<Vec<f64>>().unwrap();
        let (_, dg) = Self::metric_diagonal(position);
        Ok((0..2)
            .map(|i| -0.5 * velocity[i] * velocity[i] * dg[i])
            .collect())
    }
}

/// The toy as the sampler sees it: a [`LogDensity`] whose metric comes with it.
struct ToyTarget(Toy);

impl LogDensity for ToyTarget {
    fn dim(&self) -> usize {
        2
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        bnn_sampler::for_each_row(2, positions, log_densities, gradients, |q, g| {
            self.0.evaluate(q, g)
        })
    }

    fn riemannian(&self) -> Option<&dyn RiemannianDensity> {
        Some(&self.0)
    }
}

/// A density without a metric: MSD must refuse it with a clear error.
struct Plain;

impl LogDensity for Plain {
    fn dim(&self) -> usize {
        2
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        ToyTarget(Toy).log_density_and_gradient(positions, log_densities, gradients)
    }
}

#[test]
fn the_sampler_runs_msd_with_dual_averaging_and_hits_the_targets_moments() {
    use bnn_sampler::{ChainStart, SamplerConfig};
    let config = |threads| {
        SamplerConfig::new(MsdConfig::new().with_persistence(0.8).into())
            .with_num_warmup(500)
            .with_num_draws(5000)
            .with_seed(3)
            .with_threads(Some(threads))
            .init()
            .unwrap()
    };
    let starts: Vec<ChainStart> = (0..4)
        .map(|c| ChainStart::at(vec![0.2 * c as f64 - 0.3, 0.5]))
        .collect();
    let draws = config(2).sample(&ToyTarget(Toy), &starts).unwrap();
    // The same seed gives the same draws whatever the thread count.
    let single = config(1).sample(&ToyTarget(Toy), &starts).unwrap();
    for c in 0..4 {
        assert_eq!(
            draws.chain(c).positions,
            single.chain(c).positions,
            "chain {c}"
        );
    }
    let accept: Vec<f64> = draws
        .stat(|s| s.accept_stat)
        .into_iter()
        .flatten()
        .collect();
    let mean_accept = accept.iter().sum::<f64>() / accept.len() as f64;
    assert!(
        (mean_accept - 0.9).abs() < 0.05,
        "dual averaging aims at 0.9, got {mean_accept}"
    );
    let stats = draws.stats(0);
    assert!(stats
        .iter()
        .all(|s| s.n_leapfrog == 1 && s.kernel.get(1) >= 2.0 && s.step_size == stats[0].step_size));
    for (d, variance) in [(0, 1.0), (1, 4.0)] {
        let chains = draws.coordinate(d);
        let squares: Vec<Vec<f64>> = chains
            .iter()
            .map(|c| c.iter().map(|v| v * v).collect())
            .collect();
        let flat: Vec<f64> = squares.iter().flatten().copied().collect();
        let second = flat.iter().sum::<f64>() / flat.len() as f64;
        let mcse = bnn_diagnostics::mcse_mean(&squares);
        assert!(
            (second - variance).abs() < 4.0 * mcse,
            "E[θ{d}²] = {second} ± {mcse}, expected {variance}"
        );
    }
    let err = config(1).sample(&Plain, &starts).unwrap_err().to_string();
    assert!(err.contains("position-dependent metric"), "{err}");
    let batched = SamplerConfig::new(MsdConfig::new().into())
        .with_batched(true)
        .init()
        .unwrap_err()
        .to_string();
    assert!(batched.contains("MSD"), "{batched}");
    let bad = SamplerConfig::new(MsdConfig::new().with_persistence(1.0).into())
        .init()
        .unwrap_err()
        .to_string();
    assert!(bad.contains("persistence"), "{bad}");
}

#[test]
fn a_rejected_step_reverses_the_momentum() {
    // With persistence ≈ 1 the refresh barely changes p, so after a rejection the chain's
    // momentum is ≈ −p (and its position unchanged). Steps large enough to be rejected
    // often but not divergent (the Metropolis test rejects them, not the fixed-point
    // iteration), for both integrators.
    let toy = Toy;
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for (frozen_metric, step_size) in [(true, 2.5), (false, 1.6)] {
        let params = MsdParams {
            step_size,
            persistence: 1.0 - 1e-12,
            frozen_metric,
            ..MsdParams::default()
        };
        let mut rejections = 0;
        for t in 0..200 {
            let mut state = MsdState::at(&toy, vec![0.4 + 0.01 * t as f64, -0.9]).unwrap();
            state.momentum = vec![1.3, -0.6 - 0.02 * t as f64];
            let (end, info) = msd_transition(&toy, &mut rng, state.clone(), &params);
            if !info.accepted && !info.divergent {
                rejections += 1;
                assert_eq!(end.position, state.position);
                for i in 0..2 {
                    assert!(
                        (end.momentum[i] + state.momentum[i]).abs() < 1e-5,
                        "p {:?} after rejecting from {:?}",
                        end.momentum,
                        state.momentum
                    );
                }
            }
        }
        assert!(rejections >= 5, "frozen = {frozen_metric}: only {rejections} steps of {step_size} were rejected by the test (of 200)");
    }
}

#[test]
fn one_step_is_reversible_and_preserves_volume() {
    let toy = Toy;
    let params = MsdParams {
        step_size: 0.4,
        ..MsdParams::default()
    };
    let state_at = |q: [f64; 2], p: [f64; 2]| {
        let mut s = MsdState::at(&toy, q.to_vec()).unwrap();
        s.momentum = p.to_vec();
        s
    };
    let (q, p) = ([0.7, -1.3], [0.4, 1.1]);
    let leap = |state: &MsdState| {
        let start = toy.metric_at(&state.position).unwrap();
        params.generalized_leapfrog().step(
            &toy,
            state,
            &start,
            &toy.log_det_gradient(&start).unwrap(),
            params.step_size,
        )
    };
    let (end, _) = leap(&state_at(q, p)).unwrap();
    let flipped = [-end.point.momentum[0], -end.point.momentum[1]];
    let (back, _) = leap(&state_at(
        [end.point.position[0], end.point.position[1]],
        flipped,
    ))
    .unwrap();
    for i in 0..2 {
        assert!(
            (back.point.position[i] - q[i]).abs() < 1e-9,
            "θ back: {:?}",
            back.point.position
        );
        assert!(
            (back.point.momentum[i] + p[i]).abs() < 1e-9,
            "p back: {:?}",
            back.point.momentum
        );
    }
    // |det ∂(θ', p')/∂(θ, p)| = 1, by central differences of the map.
    let map = |z: [f64; 4]| {
        let (e, _) = leap(&state_at([z[0], z[1]], [z[2], z[3]])).unwrap();
        [
            e.point.position[0],
            e.point.position[1],
            e.point.momentum[0],
            e.point.momentum[1],
        ]
    };
    let z0 = [q[0], q[1], p[0], p[1]];
    let h = 1e-5;
    let mut jacobian = [[0.0; 4]; 4];
    for j in 0..4 {
        let (mut up, mut down) = (z0, z0);
        up[j] += h;
        down[j] -= h;
        let (a, b) = (map(up), map(down));
        for i in 0..4 {
            jacobian[i][j] = (a[i] - b[i]) / (2.0 * h);
        }
    }
    let det = determinant4(jacobian);
    assert!((det - 1.0).abs() < 1e-6, "det = {det}");
}

#[test]
fn the_energy_error_of_one_step_is_third_order_in_the_step_size() {
    // Halving ε divides |ΔH| of one generalized leapfrog step by ≈ 8.
    let toy = Toy;
    let energy_error = |step_size: f64| {
        let params = MsdParams {
            step_size,
            fixed_point_tolerance: 1e-14,
            ..MsdParams::default()
        };
        let mut state = MsdState::at(&toy, vec![0.9, -1.4]).unwrap();
        state.momentum = vec![0.8, 1.2];
        let start = toy.metric_at(&state.position).unwrap();
        let before = start.hamiltonian(state.log_density, start.kinetic_energy(&state.momentum));
        let (end, _) = params
            .generalized_leapfrog()
            .step(
                &toy,
                &state,
                &start,
                &toy.log_det_gradient(&start).unwrap(),
                params.step_size,
            )
            .unwrap();
        (end.energy - before).abs()
    };
    let errors: Vec<f64> = [0.05, 0.025, 0.0125]
        .iter()
        .map(|&e| energy_error(e))
        .collect();
    for pair in errors.windows(2) {
        let ratio = pair[0] / pair[1];
        assert!(
            (6.0..10.0).contains(&ratio),
            "|ΔH| ratio {ratio} for halving ε ({errors:?}); O(ε³) gives 8"
        );
    }
}

fn determinant4(m: [[f64; 4]; 4]) -> f64 {
    let mut a = m;
    let mut det = 1.0;
    for c in 0..4 {
        let pivot = (c..4)
            .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
            .unwrap();
        if pivot != c {
            a.swap(pivot, c);
            det = -det;
        }
        det *= a[c][c];
        for r in c + 1..4 {
            let f = a[r][c] / a[c][c];
            for k in c..4 {
                a[r][k] -= f * a[c][k];
            }
        }
    }
    det
}

/// Means and second moments of 40,000 transitions (after 1000) with their MCSEs.
fn moments(frozen_metric: bool) -> Vec<(f64, f64, f64, f64)> {
    let toy = Toy;
    let params = MsdParams {
        step_size: 0.5,
        persistence: 0.8,
        frozen_metric,
        ..MsdParams::default()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut state = MsdState::at(&toy, vec![0.3, -0.5]).unwrap();
    let mut draws = vec![Vec::new(); 2];
    let mut divergent = 0;
    for t in 0..41_000 {
        let (next, info) = msd_transition(&toy, &mut rng, state, &params);
        divergent += usize::from(info.divergent);
        state = next;
        if t >= 1000 {
            draws[0].push(state.position[0]);
            draws[1].push(state.position[1]);
        }
    }
    // Far out in the tails the metric changes fast and the fixed-point iterations may not
    // contract; those steps are rejected, which must stay rare at this step size.
    assert!(
        divergent < 400,
        "{divergent} of 41,000 steps did not converge"
    );
    (0..2)
        .map(|i| {
            let x = &draws[i];
            let squares: Vec<f64> = x.iter().map(|v| v * v).collect();
            let mean = x.iter().sum::<f64>() / x.len() as f64;
            let second = squares.iter().sum::<f64>() / x.len() as f64;
            (
                mean,
                bnn_diagnostics::mcse_mean(&[x]),
                second,
                bnn_diagnostics::mcse_mean(&[&squares]),
            )
        })
        .collect()
}

/// The frozen-metric variant's bias, measured: on the toy its second moments miss the
/// target by many MCSE (printed with `--nocapture`), while the exact step's do not.
#[test]
fn the_frozen_metric_variant_is_biased_and_says_by_how_much() {
    let variances = [1.0, 4.0];
    let frozen = moments(true);
    let misses: Vec<f64> = (0..2)
        .map(|i| (frozen[i].2 - variances[i]) / frozen[i].3)
        .collect();
    println!(
        "frozen metric: E[θ²] = {:.3}, {:.3} (target 1, 4): {:.1} and {:.1} MCSE off",
        frozen[0].2, frozen[1].2, misses[0], misses[1]
    );
    assert!(
        misses.iter().any(|m| m.abs() > 6.0),
        "the frozen metric is expected to bias this target: {frozen:?}"
    );
}

/// N(0, diag(1, 4)) within 4 MCSE. Checked by breaking the sampler on purpose: without the
/// ½ log det G term (in H and its gradient) the chain samples p(θ) det G(θ)^{-½} and this fails.
#[test]
fn the_chain_samples_the_target() {
    let variances = [1.0, 4.0];
    for (i, &(mean, mean_se, second, second_se)) in moments(false).iter().enumerate() {
        assert!(mean.abs() < 4.0 * mean_se, "E[θ{i}] = {mean} ± {mean_se}");
        assert!(
            (second - variances[i]).abs() < 4.0 * second_se,
            "E[θ{i}²] = {second} ± {second_se}, target {}",
            variances[i]
        );
    }
}

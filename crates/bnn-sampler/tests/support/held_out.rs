//! The held-out style targets a warmup or sampler must leave exact: a log-spaced Gaussian
//! (scales 1e-2..1e2), the ρ = 0.9 correlated Gaussian, a banana and a mild funnel. Every mean,
//! standard deviation and second moment is checked against its truth within `k` MCSE.

use bnn_sampler::{ChainStart, CollectedDraws, LogDensity};

use super::targets::{Banana, CorrelatedGaussian, IidGaussian, MildFunnel, MILD_FUNNEL_SD};
use super::{mcse_mean, mcse_sd, pooled_mean, pooled_sd, uniform_starts, Checks};

/// How the suite is run: the Gaussian's dimension, the chains per target, the seed of the first
/// target (the others take the next seeds) and the MCSE multiple of every check.
pub struct Suite {
    pub gaussian_dim: usize,
    pub chains: usize,
    pub first_seed: u64,
    pub k: f64,
}

impl Suite {
    /// Samples each target with `sample(target, starts, seed)` and checks its moments (also
    /// `E[Σz²] = d` of the Gaussian, the statistic most sensitive to a missing Metropolis test).
    pub fn check(
        &self,
        mut sample: impl FnMut(&dyn LogDensity, &[ChainStart], u64) -> CollectedDraws,
    ) -> Checks {
        let mut checks = Checks::default();
        let k = self.k;
        let within = |checks: &mut Checks, name: &str, chains: &[Vec<f64>], truth: f64| {
            checks.within(name, pooled_mean(chains), truth, mcse_mean(chains), k)
        };
        let (dim, chains, seed) = (self.gaussian_dim, self.chains, self.first_seed);

        let gaussian = IidGaussian::log_spaced(dim);
        let draws = sample(&gaussian, &uniform_starts(chains, dim, 1.0, seed), seed);
        for (d, scale) in gaussian.scales.iter().enumerate() {
            let x = draws.coordinate(d);
            let z: Vec<Vec<f64>> = x
                .iter()
                .map(|c| c.iter().map(|v| v / scale).collect())
                .collect();
            within(&mut checks, &format!("gaussian mean[{d}]/sd"), &z, 0.0);
            checks.within(
                &format!("gaussian sd[{d}]"),
                pooled_sd(&x),
                *scale,
                mcse_sd(&x),
                k,
            );
        }
        let chi_square = draws.map(|q| {
            q.iter()
                .zip(&gaussian.scales)
                .map(|(x, s)| (x / s).powi(2))
                .sum::<f64>()
        });
        within(&mut checks, "gaussian E[Σz²]", &chi_square, dim as f64);

        let correlated = CorrelatedGaussian {
            sd: [1.0, 2.0],
            rho: 0.9,
        };
        let draws = sample(
            &correlated,
            &uniform_starts(chains, 2, 2.0, seed + 1),
            seed + 1,
        );
        for d in 0..2 {
            let x = draws.coordinate(d);
            within(&mut checks, &format!("correlated mean[{d}]"), &x, 0.0);
            checks.within(
                &format!("correlated sd[{d}]"),
                pooled_sd(&x),
                correlated.sd[d],
                mcse_sd(&x),
                k,
            );
        }
        let product = draws.map(|q| q[0] * q[1]);
        within(&mut checks, "correlated E[x0 x1]", &product, 0.9 * 2.0);

        let banana = Banana { b: 0.5 };
        let draws = sample(&banana, &uniform_starts(chains, 2, 1.0, seed + 2), seed + 2);
        within(&mut checks, "banana E[x0]", &draws.coordinate(0), 0.0);
        within(&mut checks, "banana E[x1]", &draws.coordinate(1), 0.0);
        within(
            &mut checks,
            "banana E[x0^2]",
            &draws.map(|q| q[0] * q[0]),
            1.0,
        );
        within(
            &mut checks,
            "banana E[x1^2]",
            &draws.map(|q| q[1] * q[1]),
            1.0 + 2.0 * 0.25,
        );

        let funnel = MildFunnel { dim: 3 };
        let draws = sample(&funnel, &uniform_starts(chains, 3, 1.0, seed + 3), seed + 3);
        let v = draws.coordinate(0);
        within(&mut checks, "funnel E[v]", &v, 0.0);
        checks.within(
            "funnel sd(v)",
            pooled_sd(&v),
            MILD_FUNNEL_SD,
            mcse_sd(&v),
            k,
        );
        within(
            &mut checks,
            "funnel E[x1^2]",
            &draws.map(|q| q[1] * q[1]),
            (MILD_FUNNEL_SD * MILD_FUNNEL_SD / 2.0).exp(),
        );
        checks
    }
}

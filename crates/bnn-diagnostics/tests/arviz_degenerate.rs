//! Degenerate inputs against ArviZ 0.23.4: constant draws, stuck chains, one chain, two draws,
//! NaN and ±∞ in a draw. The expected values are ArviZ's, written here as literals, so this
//! test needs no fixture files. Generated with numpy 2.x and
//!
//! ```python
//! import numpy as np, arviz as az                       # arviz 0.23.4, no numba
//! def base(m, n):  # exact in f64, and the same in Rust (`base` below)
//!     return np.array([[((37*i + 11*j) % 101)/101 - 0.5 for i in range(n)] for j in range(m)])
//! ds = az.convert_to_dataset({"v": x})
//! az.rhat(ds), az.rhat(ds, method="z_scale"), az.rhat(ds, method="folded"),
//! az.rhat(ds, method="split"), az.ess(ds, method="bulk"), az.ess(ds, method="tail"),
//! az.ess(ds, method="mean"), az.mcse(ds, method="mean"), az.mcse(ds, method="sd"),
//! np.mean(x), np.std(x, ddof=1)
//! ```
//!
//! Tolerances as for the ArviZ fixtures: R-hat 1e-9 absolute, ESS and MCSE 1e-8 relative,
//! moments 1e-12 relative; NaN and ±∞ exactly. The one deliberate difference: where every chain
//! is constant but the chains differ (stuck chains), ArviZ divides by a within-chain variance
//! that is zero up to rounding and reports ~6e15; we report +∞.

use bnn_diagnostics::{
    ess_bulk, ess_mean, ess_tail, mcse_mean, mcse_sd, parse_long_draws_csv, rhat, rhat_bulk,
    rhat_split, rhat_tail, summarize, DrawsCsvError,
};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

/// `x[j][i] = ((37 i + 11 j) mod 101) / 101 − 0.5`.
fn base(chains: usize, draws: usize) -> Vec<Vec<f64>> {
    (0..chains)
        .map(|j| {
            (0..draws)
                .map(|i| ((37 * i + 11 * j) % 101) as f64 / 101.0 - 0.5)
                .collect()
        })
        .collect()
}

/// ArviZ's values, in the order of the snippet above.
struct Expected {
    rhat: f64,
    rhat_bulk: f64,
    rhat_tail: f64,
    rhat_split: f64,
    ess_bulk: f64,
    ess_tail: f64,
    ess_mean: f64,
    mcse_mean: f64,
    mcse_sd: f64,
    mean: f64,
    sd: f64,
}

fn close(actual: f64, expected: f64, absolute: f64, relative: f64) -> bool {
    if expected.is_nan() {
        return actual.is_nan();
    }
    if expected.is_infinite() {
        return actual == expected;
    }
    (actual - expected).abs() <= absolute.max(relative * expected.abs())
}

fn check(case: &str, chains: &[Vec<f64>], e: &Expected) {
    let summary = summarize(chains);
    let rows = [
        ("rhat", rhat(chains), e.rhat, 1e-9, 0.0),
        ("rhat_bulk", rhat_bulk(chains), e.rhat_bulk, 1e-9, 0.0),
        ("rhat_tail", rhat_tail(chains), e.rhat_tail, 1e-9, 0.0),
        ("rhat_split", rhat_split(chains), e.rhat_split, 1e-9, 0.0),
        ("ess_bulk", ess_bulk(chains), e.ess_bulk, 0.0, 1e-8),
        ("ess_tail", ess_tail(chains), e.ess_tail, 0.0, 1e-8),
        ("ess_mean", ess_mean(chains), e.ess_mean, 0.0, 1e-8),
        ("mcse_mean", mcse_mean(chains), e.mcse_mean, 0.0, 1e-8),
        ("mcse_sd", mcse_sd(chains), e.mcse_sd, 0.0, 1e-8),
        ("summary.rhat", summary.rhat, e.rhat, 1e-9, 0.0),
        ("summary.ess_bulk", summary.ess_bulk, e.ess_bulk, 0.0, 1e-8),
        ("summary.ess_tail", summary.ess_tail, e.ess_tail, 0.0, 1e-8),
        (
            "summary.mcse_mean",
            summary.mcse_mean,
            e.mcse_mean,
            0.0,
            1e-8,
        ),
        ("summary.mean", summary.mean, e.mean, 0.0, 1e-12),
        ("summary.sd", summary.sd, e.sd, 0.0, 1e-12),
    ];
    let failures: Vec<String> = rows
        .iter()
        .filter(|(_, actual, expected, absolute, relative)| {
            !close(*actual, *expected, *absolute, *relative)
        })
        .map(|(field, actual, expected, _, _)| {
            format!("{case}/{field}: got {actual:e}, ArviZ {expected:e}")
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn all_constant_draws_have_no_rhat_and_the_full_ess() {
    let chains = vec![vec![1.5; 200]; 4];
    check(
        "all_constant",
        &chains,
        &Expected {
            rhat: NAN,
            rhat_bulk: NAN,
            rhat_tail: NAN,
            rhat_split: NAN,
            ess_bulk: 800.0,
            ess_tail: 800.0,
            ess_mean: 800.0,
            mcse_mean: 0.0,
            mcse_sd: NAN,
            mean: 1.5,
            sd: 0.0,
        },
    );
}

/// Each chain constant, the chains apart: what chains that never moved look like. ArviZ's
/// R-hat here is 5969253037225963.0 (bulk 5388523761779320.0, tail the same as R-hat), its
/// split R-hat `inf`; the within-chain variance is exactly zero, so R-hat is +∞.
#[test]
fn stuck_chains_have_infinite_rhat() {
    let chains: Vec<Vec<f64>> = [-2.0, -0.5, 1.0, 4.0]
        .iter()
        .map(|&v| vec![v; 200])
        .collect();
    check(
        "stuck_chains",
        &chains,
        &Expected {
            rhat: INF,
            rhat_bulk: INF,
            rhat_tail: INF,
            rhat_split: INF,
            ess_bulk: 4.166666666666667,
            ess_tail: 4.166666666666667,
            ess_mean: 4.166666666666667,
            mcse_mean: 1.087533176741354,
            mcse_sd: 0.4997499374687305,
            mean: 0.625,
            sd: 2.21991780113696,
        },
    );
}

#[test]
fn one_stuck_chain_among_moving_ones_has_a_finite_rhat() {
    let mut chains = base(4, 200);
    chains[0] = vec![0.25; 200];
    check(
        "one_stuck_chain",
        &chains,
        &Expected {
            rhat: 1.097314623082213,
            rhat_bulk: 1.0465125273304516,
            rhat_tail: 1.097314623082213,
            rhat_split: 1.101551876392731,
            ess_bulk: 668.133916161331,
            ess_tail: 893.2282058828147,
            ess_mean: 366.39183910876216,
            mcse_mean: 0.014309964290148391,
            mcse_sd: 0.005506669071176115,
            mean: 0.05748762376237623,
            sd: 0.27391224402476494,
        },
    );
}

#[test]
fn one_chain_has_ess_but_no_rhat() {
    check(
        "one_chain",
        &base(1, 100),
        &Expected {
            rhat: NAN,
            rhat_bulk: NAN,
            rhat_tail: NAN,
            rhat_split: NAN,
            ess_bulk: 141.1737280532493,
            ess_tail: 113.43784166559665,
            ess_mean: 137.88822718196042,
            mcse_mean: 0.024800834287545287,
            mcse_sd: 0.009548036430975158,
            mean: -0.006336633663366334,
            sd: 0.29122582517373835,
        },
    );
}

#[test]
fn two_draws_per_chain_have_moments_only() {
    check(
        "two_draws",
        &base(4, 2),
        &Expected {
            rhat: NAN,
            rhat_bulk: NAN,
            rhat_tail: NAN,
            rhat_split: NAN,
            ess_bulk: NAN,
            ess_tail: NAN,
            ess_mean: NAN,
            mcse_mean: NAN,
            mcse_sd: NAN,
            mean: -0.1534653465346535,
            sd: 0.23513548687203795,
        },
    );
}

#[test]
fn a_nan_draw_makes_everything_nan() {
    let mut chains = base(4, 50);
    chains[2][7] = NAN;
    check(
        "nan_draw",
        &chains,
        &Expected {
            rhat: NAN,
            rhat_bulk: NAN,
            rhat_tail: NAN,
            rhat_split: NAN,
            ess_bulk: NAN,
            ess_tail: NAN,
            ess_mean: NAN,
            mcse_mean: NAN,
            mcse_sd: NAN,
            mean: NAN,
            sd: NAN,
        },
    );
}

/// Ranks see an infinite draw as the largest (smallest) one, so the rank-based R-hat and ESS
/// stay finite; everything computed from the raw values is NaN.
#[test]
fn an_infinite_draw_keeps_the_rank_diagnostics() {
    let mut chains = base(4, 50);
    chains[1][3] = INF;
    check(
        "inf_draw",
        &chains,
        &Expected {
            rhat: 0.9857965319801826,
            rhat_bulk: 0.9857965319801826,
            rhat_tail: 0.9807726184869968,
            rhat_split: NAN,
            ess_bulk: 353.58105856448054,
            ess_tail: 241.35508754257847,
            ess_mean: NAN,
            mcse_mean: NAN,
            mcse_sd: NAN,
            mean: INF,
            sd: NAN,
        },
    );
    let mut chains = base(4, 50);
    chains[3][10] = f64::NEG_INFINITY;
    check(
        "neg_inf_draw",
        &chains,
        &Expected {
            rhat: 0.9872800673676597,
            rhat_bulk: 0.9872800673676597,
            rhat_tail: 0.980719838635661,
            rhat_split: NAN,
            ess_bulk: 379.50206762137714,
            ess_tail: 238.9318341531975,
            ess_mean: NAN,
            mcse_mean: NAN,
            mcse_sd: NAN,
            mean: f64::NEG_INFINITY,
            sd: NAN,
        },
    );
}

/// ArviZ has no answer for chains of different lengths (its arrays are chains × draws); a
/// draws file with them is refused with a message naming both chains.
#[test]
fn chains_of_different_lengths_are_a_clear_error() {
    let text = "chain,draw,v\n0,0,1\n0,1,2\n0,2,3\n1,0,1\n1,1,2\n";
    let error = parse_long_draws_csv(text).unwrap_err();
    assert!(
        matches!(error, DrawsCsvError::UnequalChainLengths { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("chain 1 has 2 draws") && message.contains("chain 0 has 3"),
        "{message}"
    );
}

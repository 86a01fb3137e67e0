//! Chain-wise R-hat (cR̂): R-hat of one chain against itself, by cutting it into κ consecutive
//! pieces and treating the pieces as chains (Sommer et al. 2024, "Connecting the Dots: Is
//! Mode-Connectedness the Key to Feasible Sample-Based Inference in Bayesian Neural Networks?",
//! ICML; their code: `split_chain_r_hat(n_splits=4)` in `bnn_connecting_the_dots`).
//!
//! In DEI-MCMC every chain starts from its own deep-ensemble member and explores its own mode,
//! so between-chain R-hat is large *by design*; cR̂ asks instead whether each chain has settled
//! within its mode.
//!
//! Two definitions are in use, and they give noticeably different numbers (for an AR(1) chain
//! with φ = 0.99 and 1000 draws: 1.47 against 1.21):
//!
//! * [`chainwise_rhat`] (**the project's cR̂**, used in [`crate::ParameterSummary::crhat`]):
//!   Sommer et al.'s definition. Rank-normalize the chain's draws (Blom, average ties), cut them
//!   into κ pieces and apply the *basic* R̂ — no second split, no folding. We follow it because
//!   it is the quantity whose thresholds and plots the paper reports, so our numbers are
//!   comparable with theirs.
//! * [`chainwise_rank_rhat`]: ArviZ's default `az.rhat` applied to the κ pieces. ArviZ splits
//!   every piece in half again (2κ sub-chains of ⌊L/2⌋ draws) and also takes the folded (tail)
//!   R-hat, so it reacts to trends within pieces and to scale changes as well.
//!
//! When the chain length N is not a multiple of κ, the last `N mod κ` draws are dropped (Sommer's
//! code requires divisibility; the trimming is our convention). Both return NaN for κ < 2, for
//! pieces shorter than 4 draws, for NaN draws, and for a constant chain (0/0).

use crate::chain_matrix::ChainMatrix;
use crate::potential_scale_reduction::potential_scale_reduction;
use crate::rank_normalize::{ascending_order, normal_scores_in_order, BlomScoreTables};
use crate::rhat::rhat;

/// κ = 4 pieces, the setting of Sommer et al. (2024).
pub const DEFAULT_CHAINWISE_PIECES: usize = 4;

/// Sommer et al.'s cR̂ of one chain cut into `pieces` (κ) pieces: basic R̂ of the
/// rank-normalized pieces. This is the project's cR̂.
pub fn chainwise_rhat(chain: &[f64], pieces: usize) -> f64 {
    match trimmed_pieces(chain, pieces) {
        Some(piece_matrix) => chainwise_rhat_of_order(
            &ascending_order(piece_matrix.values()),
            pieces,
            &mut BlomScoreTables::default(),
        ),
        None => f64::NAN,
    }
}

/// Sommer's cR̂ from the chain's kept draws in ascending `(value, draw index)` order (κ·L of
/// them, validity already checked): score them jointly, then basic R̂ over the κ pieces.
pub(crate) fn chainwise_rhat_of_order(
    order: &[(f64, usize)],
    pieces: usize,
    tables: &mut BlomScoreTables,
) -> f64 {
    let mut scores = vec![0.0; order.len()];
    normal_scores_in_order(order, tables, &mut scores);
    potential_scale_reduction(&ChainMatrix::from_values(
        scores,
        pieces,
        order.len() / pieces,
    ))
}

/// Draws per chain that [`chainwise_rhat`] keeps (`κ·⌊N/κ⌋`), or None when it is NaN by shape.
pub(crate) fn chainwise_kept_draws(n_draws: usize, pieces: usize) -> Option<usize> {
    let piece_length = n_draws / pieces.max(1);
    (pieces >= 2 && piece_length >= 4).then_some(pieces * piece_length)
}

/// [`chainwise_rhat`] with κ = 4 (the fixtures' `crhat4_sommer`).
pub fn crhat4_sommer(chain: &[f64]) -> f64 {
    chainwise_rhat(chain, DEFAULT_CHAINWISE_PIECES)
}

/// ArviZ's rank-normalized split R-hat (`az.rhat(pieces, method="rank")`) of one chain cut into
/// `pieces` pieces.
pub fn chainwise_rank_rhat(chain: &[f64], pieces: usize) -> f64 {
    match trimmed_pieces(chain, pieces) {
        Some(piece_matrix) => {
            let rows: Vec<&[f64]> = piece_matrix.chains().collect();
            rhat(&rows)
        }
        None => f64::NAN,
    }
}

/// [`chainwise_rank_rhat`] with κ = 4 (the fixtures' `crhat4`).
pub fn crhat4(chain: &[f64]) -> f64 {
    chainwise_rank_rhat(chain, DEFAULT_CHAINWISE_PIECES)
}

/// [`chainwise_rhat`] of every chain, in order.
pub fn chainwise_rhats<C: AsRef<[f64]>>(chains: &[C], pieces: usize) -> Vec<f64> {
    chains
        .iter()
        .map(|chain| chainwise_rhat(chain.as_ref(), pieces))
        .collect()
}

/// The chain's first `κ·⌊N/κ⌋` draws as a κ × ⌊N/κ⌋ matrix, or None when no R-hat is defined.
fn trimmed_pieces(chain: &[f64], pieces: usize) -> Option<ChainMatrix> {
    let kept = &chain[..chainwise_kept_draws(chain.len(), pieces)?];
    if kept.iter().any(|v| v.is_nan()) {
        return None;
    }
    Some(ChainMatrix::from_values(
        kept.to_vec(),
        pieces,
        kept.len() / pieces,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_draws::{ar1_chain, standard_normals};

    #[test]
    fn a_stationary_chain_passes_and_a_drifting_one_fails() {
        let mut normal = standard_normals(3);
        let stationary: Vec<f64> = (0..2000).map(|_| normal()).collect();
        // iid: each piece mean has sd 1/sqrt(500), so R̂ − 1 is O(1/N); 1.01 is far above that.
        assert!(chainwise_rhat(&stationary, 4) < 1.01);
        let drifting: Vec<f64> = stationary
            .iter()
            .enumerate()
            .map(|(i, v)| v + i as f64 / 500.0)
            .collect();
        // The piece means step by 1 sd: B/W ≈ 500 · 1.67 → R̂ ≈ 1.6.
        assert!(chainwise_rhat(&drifting, 4) > 1.3);
        assert!(crhat4(&drifting) > 1.3);
    }

    #[test]
    fn the_two_definitions_differ_for_a_slowly_mixing_chain() {
        let chain = ar1_chain(0.99, 1000, 11);
        let sommer = crhat4_sommer(&chain);
        let arviz = crhat4(&chain);
        // Both flag the chain (τ ≈ 200 draws against pieces of 250) ...
        assert!(sommer > 1.05 && arviz > 1.05, "{sommer}, {arviz}");
        // ... but not with the same number (the fixtures show 1.21 against 1.47 for such a
        // chain), which is why the choice of definition has to be explicit.
        assert!((sommer - arviz).abs() > 0.01, "{sommer} vs {arviz}");
    }

    #[test]
    fn trims_the_remainder_and_rejects_degenerate_input() {
        let chain: Vec<f64> = (0..103).map(|i| ((i * 37) % 101) as f64).collect();
        assert_eq!(chainwise_rhat(&chain, 4), chainwise_rhat(&chain[..100], 4));
        assert!(chainwise_rhat(&chain, 1).is_nan());
        assert!(
            chainwise_rhat(&chain[..15], 4).is_nan(),
            "pieces of 3 draws"
        );
        assert!(
            chainwise_rhat(&[2.5; 40], 4).is_nan(),
            "constant chain is 0/0"
        );
        assert_eq!(chainwise_rhats(&[chain.clone(), chain.clone()], 4).len(), 2);
    }
}

//! Isokinetic (unit-speed) dynamics for microcanonical samplers: the exact velocity update under a
//! fixed gradient, the position drift and the partial velocity refresh. McLachlan's two-gradient
//! splitting of them, one chain's resumable path, is `isokinetic_path`.
//!
//! The velocity `u` lives on the unit sphere. Under a constant force `g = ∇ log p` its motion
//! has a closed form (Ver Steeg & Galstyan 2021; Robnik et al. 2023):
//! with `ĝ = g/|g|`, `δ = ε|g|/(d − 1)` and `ζ = e^{−δ}`,
//! `u' ∝ ĝ(1 − ζ)(1 + ζ + (ĝ·u)(1 − ζ)) + 2ζu`, and the kinetic energy changes by
//! `(d − 1)(δ − ln 2 + ln(1 + ĝ·u + (1 − ĝ·u)ζ²))`. The energy change of a step (kinetic change
//! minus the change of `log p`) is what the MCLMC tuner watches (its variance per dimension
//! measures the integration error) and what MAMS's Metropolis test uses.

/// Updates the unit velocity `velocity` under the force `gradient` for a time `time` (the step
/// size times the splitting coefficient) and returns the kinetic energy change.
///
/// A zero gradient leaves the velocity as it is (no direction to turn to).
pub fn update_velocity(velocity: &mut [f64], gradient: &[f64], time: f64) -> f64 {
    bnn_numerics::dispatch!(kick_unscaled(velocity, gradient, time, None))
}

/// [`update_velocity`] under the force `scale ⊙ gradient` (a diagonal preconditioner's
/// `√Σ`), formed on the fly instead of in a buffer: the kick is a few passes over `d` values
/// three times per step, a visible share of a microcanonical step on small networks.
pub fn update_velocity_scaled(
    velocity: &mut [f64],
    gradient: &[f64],
    scale: &[f64],
    time: f64,
) -> f64 {
    bnn_numerics::dispatch!(kick_scaled(velocity, gradient, scale, time, None))
}

/// The scaled kick followed by the drift `position += t · scale ⊙ u` with the new velocity.
pub(crate) fn update_velocity_scaled_and_drift(
    velocity: &mut [f64],
    gradient: &[f64],
    scale: &[f64],
    time: f64,
    position: &mut [f64],
    t: f64,
) -> f64 {
    bnn_numerics::dispatch!(kick_scaled(
        velocity,
        gradient,
        scale,
        time,
        Some((position, t))
    ))
}

// The two instantiations `dispatch!` can name (it takes type, not const, generics).
#[inline(always)]
fn kick_unscaled(
    velocity: &mut [f64],
    gradient: &[f64],
    time: f64,
    drift: Option<(&mut [f64], f64)>,
) -> f64 {
    kick_and_drift::<false>(velocity, gradient, gradient, time, drift)
}

#[inline(always)]
fn kick_scaled(
    velocity: &mut [f64],
    gradient: &[f64],
    scale: &[f64],
    time: f64,
    drift: Option<(&mut [f64], f64)>,
) -> f64 {
    kick_and_drift::<true>(velocity, gradient, scale, time, drift)
}

/// The kick, then (with `drift = Some((position, t))`) the drift `position += t · scale ⊙ u` with
/// the new velocity, in two passes over the `d` values: the first collects `|f|²`, `f·u` and
/// `|u|²`, from which the norm of the raw new velocity `a f + b u` follows in closed form
/// (`a²|f|² + 2ab f·u + b²|u|²`), so the second pass writes the normalized velocity and moves the
/// position at once. Where that closed form loses its digits to cancellation (`a f` nearly
/// opposite `b u`) the norm is summed from the raw velocity instead. The force is
/// `gradient ⊙ scale` when `SCALED`, else `gradient` (then `scale` is not read).
#[inline(always)]
fn kick_and_drift<const SCALED: bool>(
    velocity: &mut [f64],
    gradient: &[f64],
    scale: &[f64],
    time: f64,
    drift: Option<(&mut [f64], f64)>,
) -> f64 {
    let dim = velocity.len();
    let force = |g: f64, s: f64| if SCALED { g * s } else { g };
    let mut sums = KickSums {
        square: [0.0; LANES],
        dot: [0.0; LANES],
        speed: [0.0; LANES],
    };
    let ((gs, g_tail), (ss, s_tail), (us, u_tail)) =
        (lanes(gradient), lanes(scale), lanes(velocity));
    for ((g, s), u) in gs.iter().zip(ss).zip(us) {
        sums.add::<SCALED>(g, s, u);
    }
    // The tail as one zero-padded chunk: the padding adds exact zeros.
    sums.add::<SCALED>(&padded(g_tail), &padded(s_tail), &padded(u_tail));
    let KickSums { square, dot, speed } = sums;
    let square: f64 = square.iter().sum();
    let gradient_norm = square.sqrt();
    if gradient_norm == 0.0 || dim < 2 {
        if let Some((position, t)) = drift {
            drift_position::<SCALED>(position, velocity, scale, t);
        }
        return 0.0;
    }
    let dot: f64 = dot.iter().sum();
    let speed: f64 = speed.iter().sum();
    let dims_minus_one = (dim - 1) as f64;
    let delta = time * gradient_norm / dims_minus_one;
    let zeta = (-delta).exp();
    let projection = dot / gradient_norm;
    let along = (1.0 - zeta) * (1.0 + zeta + projection * (1.0 - zeta)) / gradient_norm;
    let twice_zeta = 2.0 * zeta;
    let spread = along * along * square + twice_zeta * twice_zeta * speed;
    let raw_norm_sq = spread + 2.0 * along * twice_zeta * dot;
    if raw_norm_sq > 1e-6 * spread {
        let inverse_norm = 1.0 / raw_norm_sq.sqrt();
        let (a, b) = (along * inverse_norm, twice_zeta * inverse_norm);
        match drift {
            Some((position, t)) => {
                for (((u, x), &g), &s) in velocity
                    .iter_mut()
                    .zip(position.iter_mut())
                    .zip(gradient)
                    .zip(scale)
                {
                    *u = a * force(g, s) + b * *u;
                    *x += t * force(*u, s);
                }
            }
            None => {
                for ((u, &g), &s) in velocity.iter_mut().zip(gradient).zip(scale) {
                    *u = a * force(g, s) + b * *u;
                }
            }
        }
    } else {
        for ((u, &g), &s) in velocity.iter_mut().zip(gradient).zip(scale) {
            *u = along * force(g, s) + twice_zeta * *u;
        }
        scale_to_unit(velocity);
        if let Some((position, t)) = drift {
            drift_position::<SCALED>(position, velocity, scale, t);
        }
    }
    dims_minus_one
        * (delta - std::f64::consts::LN_2
            + (1.0 + projection + (1.0 - projection) * zeta * zeta).ln())
}

/// A kick's first pass: per lane, `|f|²`, `f·u` and `|u|²`.
struct KickSums {
    square: [f64; LANES],
    dot: [f64; LANES],
    speed: [f64; LANES],
}

impl KickSums {
    #[inline(always)]
    fn add<const SCALED: bool>(&mut self, g: &[f64; LANES], s: &[f64; LANES], u: &[f64; LANES]) {
        for k in 0..LANES {
            let f = if SCALED { g[k] * s[k] } else { g[k] };
            self.square[k] += f * f;
            self.dot[k] += f * u[k];
            self.speed[k] += u[k] * u[k];
        }
    }
}

/// `position += t · scale ⊙ velocity` (`scale` unread unless `SCALED`).
#[inline(always)]
fn drift_position<const SCALED: bool>(
    position: &mut [f64],
    velocity: &[f64],
    scale: &[f64],
    t: f64,
) {
    if SCALED {
        for ((x, u), s) in position.iter_mut().zip(velocity).zip(scale) {
            *x += t * (u * s);
        }
    } else {
        for (x, u) in position.iter_mut().zip(velocity) {
            *x += t * u;
        }
    }
}

/// `|v|²` in [`LANES`] partial sums (fixed order: the same bits on every machine and level).
#[inline(always)]
fn squared_norm(vector: &[f64]) -> f64 {
    let mut partial = [0.0; LANES];
    let (chunks, tail) = lanes(vector);
    for chunk in chunks.iter().chain([&padded(tail)]) {
        for k in 0..LANES {
            partial[k] += chunk[k] * chunk[k];
        }
    }
    partial.iter().sum()
}

/// `values` as whole [`LANES`]-chunks and the rest. Typed chunks and a padded tail (instead of a
/// tail loop indexing the partial sums by a run-time lane) let the compiler keep each array of
/// partial sums in one vector register; with the tail loop it kept them as scalars and shuffled
/// them into vectors and back on every chunk.
#[inline(always)]
fn lanes(values: &[f64]) -> (&[[f64; LANES]], &[f64]) {
    values.as_chunks::<LANES>()
}

/// A tail of fewer than [`LANES`] values, zero-padded to a whole chunk.
#[inline(always)]
fn padded(tail: &[f64]) -> [f64; LANES] {
    let mut chunk = [0.0; LANES];
    chunk[..tail.len()].copy_from_slice(tail);
    chunk
}

/// Divides `vector` by its norm (multiplying by the reciprocal).
#[inline(always)]
fn scale_to_unit(vector: &mut [f64]) {
    let inverse_norm = 1.0 / squared_norm(vector).sqrt();
    vector.iter_mut().for_each(|v| *v *= inverse_norm);
}

/// Independent partial sums per lane, so the reductions below vectorize (a single running sum
/// is a chain of dependent additions). The summation order is fixed, so results do not depend
/// on the machine or thread count.
const LANES: usize = 8;

/// Partial velocity refresh (the Langevin part of MCLMC): `u ← normalize(c₁u + c₂ z/√d)` with
/// `c₁ = e^{−ε/L}`, `c₂ = √(1 − c₁²)` and `z` the `d` standard normals in `noise`. `L = ∞`
/// keeps the velocity (pure microcanonical dynamics).
pub fn refresh_velocity(
    velocity: &mut [f64],
    noise: &[f64],
    step_size: f64,
    trajectory_length: f64,
) {
    let keep = (-step_size / trajectory_length).exp();
    let fresh = (1.0 - keep * keep).max(0.0).sqrt() / (velocity.len() as f64).sqrt();
    bnn_numerics::dispatch!(mix_and_normalize(velocity, noise, keep, fresh))
}

/// The mix and its squared norm in one pass (the norm summed in [`squared_norm`]'s lanes and
/// order, so the result is that of mixing, then [`scale_to_unit`], to the bit), then the scaling.
#[inline(always)]
fn mix_and_normalize(velocity: &mut [f64], noise: &[f64], keep: f64, fresh: f64) {
    let mut partial = [0.0; LANES];
    let (us, u_tail) = velocity.as_chunks_mut::<LANES>();
    let (zs, z_tail) = lanes(noise);
    let mut tail = padded(u_tail);
    let padded_noise = padded(z_tail);
    for (u, z) in us
        .iter_mut()
        .chain([&mut tail])
        .zip(zs.iter().chain([&padded_noise]))
    {
        for k in 0..LANES {
            u[k] = keep * u[k] + fresh * z[k];
            partial[k] += u[k] * u[k];
        }
    }
    let tail_len = u_tail.len();
    u_tail.copy_from_slice(&tail[..tail_len]);
    let inverse_norm = 1.0 / partial.iter().sum::<f64>().sqrt();
    velocity.iter_mut().for_each(|v| *v *= inverse_norm);
}

/// Scales `noise` (standard normals) to a unit vector: a uniform direction on the sphere.
pub fn normalize(vector: &mut [f64]) {
    let norm = vector.iter().map(|v| v * v).sum::<f64>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|v| *v /= norm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn velocity_stays_on_the_sphere_and_turns_toward_the_force() {
        let mut u = vec![0.6, 0.8, 0.0];
        let g = [0.0, 0.0, 5.0];
        let before = u[2];
        let kinetic = update_velocity(&mut u, &g, 0.3);
        let norm: f64 = u.iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-12);
        assert!(u[2] > before, "velocity turns toward ∇ log p: {u:?}");
        assert!(
            kinetic > 0.0,
            "moving uphill in log p gains kinetic energy: {kinetic}"
        );
    }

    #[test]
    fn a_scaled_kick_is_the_kick_under_the_scaled_force_to_the_bit() {
        let dim = 37; // not a multiple of the lanes
        let gradient: Vec<f64> = (0..dim)
            .map(|i| ((i * 7 % 11) as f64 - 5.0) * 0.3)
            .collect();
        let scale: Vec<f64> = (0..dim).map(|i| 0.1 + (i % 5) as f64 * 0.4).collect();
        let start: Vec<f64> = (0..dim)
            .map(|i| ((i * 3 % 7) as f64 - 3.0) / 10.0)
            .collect();
        let (mut a, mut b) = (start.clone(), start.clone());
        normalize(&mut a);
        normalize(&mut b);
        let force: Vec<f64> = gradient.iter().zip(&scale).map(|(g, s)| g * s).collect();
        let kinetic_scaled = update_velocity_scaled(&mut a, &gradient, &scale, 0.7);
        let kinetic = update_velocity(&mut b, &force, 0.7);
        assert_eq!(kinetic_scaled.to_bits(), kinetic.to_bits());
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
    }

    /// The kick as the closed form reads: the raw velocity normalized by summing its squares.
    fn reference_kick(velocity: &mut [f64], force: &[f64], time: f64) -> f64 {
        let norm = force.iter().map(|f| f * f).sum::<f64>().sqrt();
        let d1 = (velocity.len() - 1) as f64;
        let delta = time * norm / d1;
        let zeta = (-delta).exp();
        let projection = force
            .iter()
            .zip(velocity.iter())
            .map(|(f, u)| f * u)
            .sum::<f64>()
            / norm;
        for (u, f) in velocity.iter_mut().zip(force) {
            *u = f / norm * (1.0 - zeta) * (1.0 + zeta + projection * (1.0 - zeta))
                + 2.0 * zeta * *u;
        }
        normalize(velocity);
        d1 * (delta - std::f64::consts::LN_2
            + (1.0 + projection + (1.0 - projection) * zeta * zeta).ln())
    }

    #[test]
    fn the_fused_kick_and_drift_match_the_closed_form_even_against_the_force() {
        let dim = 29;
        let scale: Vec<f64> = (0..dim).map(|i| 0.5 + (i % 3) as f64 * 0.25).collect();
        let gradient: Vec<f64> = (0..dim)
            .map(|i| ((i * 5 % 13) as f64 - 6.0) * 0.7)
            .collect();
        let force: Vec<f64> = gradient.iter().zip(&scale).map(|(g, s)| g * s).collect();
        let aligned: Vec<f64> = (0..dim)
            .map(|i| ((i * 3 % 7) as f64 - 3.0) / 10.0)
            .collect();
        // Straight against the force with a huge step: `a f` and `b u` nearly cancel, the case
        // the closed-form norm hands to the summed one.
        let against: Vec<f64> = force.iter().map(|f| -f).collect();
        // δ = 10 against the force: `a f ≈ −b u` up to 2ζ² ≈ 4e-9 of `b u`.
        let norm = force.iter().map(|f| f * f).sum::<f64>().sqrt();
        let cancelling = 10.0 * (dim - 1) as f64 / norm;
        for (start, time, tolerance) in [
            (aligned, 0.3, 1e-12),
            (against.clone(), 0.3, 1e-12),
            (against, cancelling, 1e-7),
        ] {
            let mut expected = start.clone();
            normalize(&mut expected);
            let mut u = expected.clone();
            let kinetic_expected = reference_kick(&mut expected, &force, time);
            let mut position: Vec<f64> = (0..dim).map(|i| i as f64 * 0.1).collect();
            let before = position.clone();
            let kinetic = update_velocity_scaled_and_drift(
                &mut u,
                &gradient,
                &scale,
                time,
                &mut position,
                0.05,
            );
            assert!(
                (kinetic - kinetic_expected).abs() < 1e-6 * kinetic_expected.abs().max(1.0),
                "{kinetic} vs {kinetic_expected}"
            );
            let norm: f64 = u.iter().map(|v| v * v).sum();
            assert!((norm - 1.0).abs() < 1e-12, "|u|² = {norm}");
            for i in 0..dim {
                assert!(
                    (u[i] - expected[i]).abs() < tolerance,
                    "u[{i}]: {} vs {}",
                    u[i],
                    expected[i]
                );
                let moved = before[i] + 0.05 * scale[i] * u[i];
                assert!((position[i] - moved).abs() < 1e-14, "x[{i}]");
            }
        }
    }

    #[test]
    fn velocity_updates_compose_like_the_flow() {
        // The closed form is the exact flow of a constant force: two half-time updates equal one
        // full-time update, and their kinetic changes add up.
        let g = [1.0, -2.0, 0.5, 3.0];
        let start = vec![0.5, 0.5, -0.5, 0.5];
        let mut once = start.clone();
        let k_once = update_velocity(&mut once, &g, 0.4);
        let mut twice = start;
        let k_twice = update_velocity(&mut twice, &g, 0.2) + update_velocity(&mut twice, &g, 0.2);
        for (a, b) in once.iter().zip(&twice) {
            assert!((a - b).abs() < 1e-12, "{once:?} vs {twice:?}");
        }
        assert!((k_once - k_twice).abs() < 1e-12, "{k_once} vs {k_twice}");
    }

    #[test]
    fn the_one_pass_refresh_is_mixing_then_normalizing_to_the_bit() {
        for dim in [5, 8, 37, 418] {
            let start: Vec<f64> = (0..dim)
                .map(|i| ((i * 3 % 7) as f64 - 3.0) / 10.0)
                .collect();
            let noise: Vec<f64> = (0..dim)
                .map(|i| ((i * 5 % 11) as f64 - 5.0) / 4.0)
                .collect();
            let (keep, fresh) = (0.93, 0.02);
            let mut fused = start.clone();
            mix_and_normalize(&mut fused, &noise, keep, fresh);
            let mut plain: Vec<f64> = start
                .iter()
                .zip(&noise)
                .map(|(u, z)| keep * u + fresh * z)
                .collect();
            let norm_sq = (0..LANES)
                .map(|k| {
                    plain
                        .iter()
                        .skip(k)
                        .step_by(LANES)
                        .fold(0.0, |s, v| s + v * v)
                })
                .sum::<f64>();
            assert_eq!(
                norm_sq.to_bits(),
                squared_norm(&plain).to_bits(),
                "dim {dim}: the lanes' order"
            );
            scale_to_unit(&mut plain);
            assert!(
                fused
                    .iter()
                    .zip(&plain)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "dim {dim}"
            );
        }
    }

    #[test]
    fn refresh_keeps_unit_speed_and_infinite_length_keeps_the_velocity() {
        let mut u = vec![1.0, 0.0, 0.0];
        refresh_velocity(&mut u, &[0.3, -1.0, 2.0], 0.1, f64::INFINITY);
        assert_eq!(u, vec![1.0, 0.0, 0.0]);
        refresh_velocity(&mut u, &[0.3, -1.0, 2.0], 0.5, 1.0);
        let norm: f64 = u.iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-12 && u[1] < 0.0 && u[2] > 0.0);
    }
}

//! Deterministic pseudo-random draws for unit tests, so that no test needs an RNG crate and no
//! statistical test can flake: SplitMix64 (Steele et al. 2014) for uniforms, Box–Muller for
//! normals.

/// An endless stream of uniforms in (0, 1).
pub(crate) fn uniforms(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed;
    move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
}

/// An endless stream of standard normals.
pub(crate) fn standard_normals(seed: u64) -> impl FnMut() -> f64 {
    let mut uniform = uniforms(seed);
    move || {
        let (u, v) = (uniform(), uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// A stationary AR(1) chain with unit marginal variance:
/// `x_0 ~ N(0, 1)`, `x_t = φ x_{t−1} + sqrt(1 − φ²) ε_t`.
pub(crate) fn ar1_chain(phi: f64, n: usize, seed: u64) -> Vec<f64> {
    let mut normal = standard_normals(seed);
    let innovation_scale = (1.0 - phi * phi).sqrt();
    let mut value = normal();
    (0..n)
        .map(|_| {
            let current = value;
            value = phi * value + innovation_scale * normal();
            current
        })
        .collect()
}

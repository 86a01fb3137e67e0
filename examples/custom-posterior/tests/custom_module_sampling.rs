//! The user-module path samples a sensible posterior: the predictive mean tracks cos(2x)
//! within the noise scale and the chains agree.

#[test]
fn residual_regressor_posterior_recovers_the_function() {
    let result = custom_posterior::run(6, 2, 150, 150, 3).unwrap();
    for i in 0..result.grid.len() {
        let truth = (2.0 * result.grid[i]).cos();
        // With 100 points and σ = 0.1, the posterior mean of f(x) lies within a few posterior
        // sds (and well within 0.25) of the truth when the sampler and the posterior are right;
        // a wrong gradient or likelihood sends it far off.
        let err = (result.mean[i] - truth).abs();
        assert!(
            err < 0.25,
            "x = {}: mean {} vs cos(2x) {}",
            result.grid[i],
            result.mean[i],
            truth
        );
        assert!(
            result.sd[i] < 0.3,
            "posterior sd {} too wide at x = {}",
            result.sd[i],
            result.grid[i]
        );
    }
}

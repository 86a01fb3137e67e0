//! Synthetic data: shapes, ranges, noise level and seed determinism.

use bnn_data::{
    cos2x, robot_arm, robot_arm_stacked, DataError, ROBOT_ARM_NOISE_SD, ROBOT_ARM_ROWS_PER_PART,
};

fn mean_and_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (
        mean,
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt(),
    )
}

#[test]
fn cos2x_shape_and_range() {
    let d = cos2x(100, 0.1, 3).unwrap();
    assert_eq!((d.n_rows(), d.n_features(), d.n_targets()), (100, 1, 1));
    assert!(d.x.data.iter().all(|&x| (0.0..4.0).contains(&x)));
    assert!(d.source.starts_with("generated:cos2x"));
}

#[test]
fn cos2x_noise_has_the_requested_sd() {
    // Residuals y - cos 2x are n iid N(0, s^2) draws. The sample sd has standard error
    // about s / sqrt(2n) and the sample mean s / sqrt(n); 5 standard errors leave a false
    // alarm chance below 1e-6, while a wrong noise level (e.g. variance 0.1 instead of sd
    // 0.1, an error of 0.216) is 300 standard errors away.
    let (n, s) = (10_000, 0.1);
    let d = cos2x(n, s, 17).unwrap();
    let residuals: Vec<f64> =
        d.x.data
            .iter()
            .zip(&d.y.data)
            .map(|(x, y)| y - (2.0 * x).cos())
            .collect();
    let (mean, sd) = mean_and_sd(&residuals);
    let n = n as f64;
    assert!(mean.abs() < 5.0 * s / n.sqrt(), "residual mean {mean}");
    assert!(
        (sd - s).abs() < 5.0 * s / (2.0 * n).sqrt(),
        "residual sd {sd}"
    );
    // x ~ U(0, 4): mean 2, sd 4/sqrt(12); same 5-standard-error rule.
    let (x_mean, _) = mean_and_sd(&d.x.data);
    assert!(
        (x_mean - 2.0).abs() < 5.0 * (4.0 / 12f64.sqrt()) / n.sqrt(),
        "x mean {x_mean}"
    );
}

#[test]
fn cos2x_is_deterministic_per_seed() {
    assert_eq!(cos2x(50, 0.1, 1).unwrap(), cos2x(50, 0.1, 1).unwrap());
    assert_ne!(cos2x(50, 0.1, 1).unwrap().x, cos2x(50, 0.1, 2).unwrap().x);
}

#[test]
fn cos2x_rejects_bad_parameters() {
    assert!(matches!(
        cos2x(0, 0.1, 0),
        Err(DataError::InvalidParameter { .. })
    ));
    for bad in [-0.1, f64::NAN, f64::INFINITY] {
        let err = cos2x(10, bad, 0).unwrap_err();
        assert!(err.to_string().contains("noise_sd"), "{err}");
    }
    // Zero noise is allowed and gives the exact curve.
    let exact = cos2x(5, 0.0, 0).unwrap();
    for (x, y) in exact.x.data.iter().zip(&exact.y.data) {
        assert_eq!(*y, (2.0 * x).cos());
    }
}

#[test]
#[allow(clippy::approx_constant)] // 3.142 is MacKay's published bound, not PI
fn robot_arm_shapes_and_input_ranges() {
    let (train, test) = robot_arm(0);
    for d in [&train, &test] {
        assert_eq!(
            (d.n_rows(), d.n_features(), d.n_targets()),
            (ROBOT_ARM_ROWS_PER_PART, 2, 2)
        );
        for row in d.x.iter_rows() {
            assert!((0.453..1.932).contains(&row[0].abs()), "x1 = {}", row[0]);
            assert!((0.534..3.142).contains(&row[1]), "x2 = {}", row[1]);
        }
    }
    // Both halves of the x1 domain are used: P(all 200 on one side) = 2^-199.
    assert!(
        train.x.column(0).iter().any(|&v| v < 0.0) && train.x.column(0).iter().any(|&v| v > 0.0)
    );
}

#[test]
fn robot_arm_targets_follow_the_kinematics_with_the_stated_noise() {
    // 800 residuals (400 rows x 2 outputs): 5 standard errors of the sample sd, s/sqrt(2n).
    let d = robot_arm_stacked(21);
    let mut residuals = Vec::new();
    for (x, y) in d.x.iter_rows().zip(d.y.iter_rows()) {
        residuals.push(y[0] - (2.0 * x[0].cos() + 1.3 * (x[0] + x[1]).cos()));
        residuals.push(y[1] - (2.0 * x[0].sin() + 1.3 * (x[0] + x[1]).sin()));
    }
    let n = residuals.len() as f64;
    let (mean, sd) = mean_and_sd(&residuals);
    let s = ROBOT_ARM_NOISE_SD;
    assert!(mean.abs() < 5.0 * s / n.sqrt(), "residual mean {mean}");
    assert!(
        (sd - s).abs() < 5.0 * s / (2.0 * n).sqrt(),
        "residual sd {sd}"
    );
}

#[test]
fn robot_arm_parts_are_the_halves_of_the_stacked_rows_and_seeded() {
    let stacked = robot_arm_stacked(4);
    let (train, test) = robot_arm(4);
    assert_eq!(train.x.data[..], stacked.x.data[..400]);
    assert_eq!(test.y.data[..], stacked.y.data[400..]);
    assert_eq!(robot_arm(4), robot_arm(4));
    assert_ne!(robot_arm(4).0.x, robot_arm(5).0.x);
}

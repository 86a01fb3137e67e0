//! MacKay's two-joint robot arm: joint angles in, the two Cartesian coordinates of the hand out.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use crate::dataset::Dataset;
use crate::matrix::Matrix;

/// Rows in each of the training and test sets, as in MacKay (1992) and Neal (1996).
pub const ROBOT_ARM_ROWS_PER_PART: usize = 200;
/// Standard deviation of the Gaussian noise added to each output.
pub const ROBOT_ARM_NOISE_SD: f64 = 0.05;

/// `|x1|` is uniform on this interval and its sign is a fair coin, which makes `x1` uniform
/// on `[-1.932, -0.453] ∪ [0.453, 1.932]`.
const X1_MAGNITUDE: (f64, f64) = (0.453, 1.932);
/// The published bounds; 3.142 is MacKay's rounded figure, kept as printed rather than `PI`.
#[allow(clippy::approx_constant)]
const X2_RANGE: (f64, f64) = (0.534, 3.142);

/// Training and test sets of 200 rows each:
/// `y1 = 2 cos x1 + 1.3 cos(x1 + x2) + e1`, `y2 = 2 sin x1 + 1.3 sin(x1 + x2) + e2`,
/// `e ~ N(0, 0.05²)`.
///
/// The problem is from MacKay, "A Practical Bayesian Framework for Backpropagation Networks",
/// Neural Computation 4(3):448–472, 1992, and was used as the standard small benchmark by
/// Neal, "Bayesian Learning for Neural Networks", Springer, 1996. Both parts come from one
/// seeded stream: the training rows first.
pub fn robot_arm(seed: u64) -> (Dataset, Dataset) {
    let all = robot_arm_stacked(seed);
    let train: Vec<usize> = (0..ROBOT_ARM_ROWS_PER_PART).collect();
    let test: Vec<usize> = (ROBOT_ARM_ROWS_PER_PART..2 * ROBOT_ARM_ROWS_PER_PART).collect();
    let mut train_set = all.select_rows(&train);
    let mut test_set = all.select_rows(&test);
    train_set.name = "robot-arm-train".into();
    test_set.name = "robot-arm-test".into();
    (train_set, test_set)
}

/// The 400 rows of [`robot_arm`] in one dataset: rows `0..200` are the canonical training set
/// and rows `200..400` the test set (see `split_at_row`).
pub fn robot_arm_stacked(seed: u64) -> Dataset {
    let n = 2 * ROBOT_ARM_ROWS_PER_PART;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(2 * n);
    let mut y = Vec::with_capacity(2 * n);
    for _ in 0..n {
        let sign = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
        let x1 = sign * rng.random_range(X1_MAGNITUDE.0..X1_MAGNITUDE.1);
        let x2 = rng.random_range(X2_RANGE.0..X2_RANGE.1);
        let e1: f64 = rng.sample(StandardNormal);
        let e2: f64 = rng.sample(StandardNormal);
        x.extend([x1, x2]);
        y.push(2.0 * x1.cos() + 1.3 * (x1 + x2).cos() + ROBOT_ARM_NOISE_SD * e1);
        y.push(2.0 * x1.sin() + 1.3 * (x1 + x2).sin() + ROBOT_ARM_NOISE_SD * e2);
    }
    Dataset {
        name: "robot-arm".into(),
        source: format!("generated:robot-arm(seed={seed})"),
        feature_names: vec!["x1".into(), "x2".into()],
        target_names: vec!["y1".into(), "y2".into()],
        x: Matrix::new(n, 2, x),
        y: Matrix::new(n, 2, y),
    }
}

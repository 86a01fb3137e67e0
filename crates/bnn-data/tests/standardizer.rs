//! Standardization: zero mean and unit sd on the fitting rows, exact inverses, both stats sources.

use bnn_data::{
    split_at_row, standardize_split, train_test_split, ColumnRole, DataError, Dataset, Matrix,
    Standardizer, StatsSource,
};

/// Deterministic, irregular data: two features and two targets on different scales.
fn irregular(n: usize) -> Dataset {
    let x = (0..n)
        .flat_map(|i| {
            let t = i as f64;
            [1000.0 + 37.0 * (t * 0.7).sin(), 0.001 * t * t]
        })
        .collect();
    let y = (0..n)
        .flat_map(|i| [(i as f64).sqrt() * 5.0 - 3.0, ((i * 7) % 11) as f64])
        .collect();
    Dataset {
        name: "irregular".into(),
        source: "test".into(),
        feature_names: vec!["a".into(), "b".into()],
        target_names: vec!["u".into(), "v".into()],
        x: Matrix::new(n, 2, x),
        y: Matrix::new(n, 2, y),
    }
}

/// Mean and divisor-n sd of each column.
fn moments(m: &Matrix) -> Vec<(f64, f64)> {
    (0..m.cols)
        .map(|j| {
            let c = m.column(j);
            let n = c.len() as f64;
            let mean = c.iter().sum::<f64>() / n;
            (
                mean,
                (c.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt(),
            )
        })
        .collect()
}

fn assert_close(a: f64, b: f64, tol: f64) {
    assert!((a - b).abs() <= tol, "{a} vs {b}");
}

#[test]
fn training_stats_give_zero_mean_unit_sd_on_train() {
    let split = train_test_split(&irregular(120), 0.25, 4).unwrap();
    let (standardized, _) = standardize_split(&split, StatsSource::TrainingSplit).unwrap();
    for m in [&standardized.train.x, &standardized.train.y] {
        for (mean, sd) in moments(m) {
            assert_close(mean, 0.0, 1e-12);
            assert_close(sd, 1.0, 1e-12);
        }
    }
    // The test part uses the training statistics, so it is not exactly centred.
    let test_mean = moments(&standardized.test.x)[0].0;
    assert!(test_mean.abs() > 1e-6, "test part looks fitted on itself");
}

#[test]
fn sd_uses_divisor_n() {
    // Column 1, 2, 3, 4: population sd sqrt(1.25); the n-1 version would be sqrt(5/3).
    let x = Matrix::new(4, 1, vec![1.0, 2.0, 3.0, 4.0]);
    let y = Matrix::new(4, 1, vec![0.0, 2.0, 0.0, 2.0]);
    let s = Standardizer::fit(&x, &y).unwrap();
    assert_close(s.x_mean[0], 2.5, 0.0);
    assert_close(s.x_sd[0], 1.25f64.sqrt(), 1e-15);
    assert_close(s.y_sd[0], 1.0, 1e-15);
}

#[test]
fn inverses_map_back_to_original_units() {
    let data = irregular(50);
    let s = Standardizer::fit(&data.x, &data.y).unwrap();
    let back = s.inverse_y_mean(&s.transform_y(&data.y));
    for (a, b) in back.data.iter().zip(&data.y.data) {
        assert_close(*a, *b, 1e-12 * b.abs().max(1.0));
    }
    let unit = Matrix::new(1, 2, vec![1.0, 0.5]);
    let scaled = s.inverse_y_scale(&unit);
    assert_close(scaled.data[0], s.y_sd[0], 0.0);
    assert_close(scaled.data[1], 0.5 * s.y_sd[1], 0.0);
}

#[test]
fn full_data_uses_every_row_of_the_original_dataset() {
    let data = irregular(90);
    let split = train_test_split(&data, 0.3, 8).unwrap();
    let (_, from_full) = standardize_split(&split, StatsSource::FullData).unwrap();
    let (_, from_train) = standardize_split(&split, StatsSource::TrainingSplit).unwrap();
    let reference = Standardizer::fit(&data.x, &data.y).unwrap();
    // Same rows in the same order, so the statistics agree to the last bit.
    assert_eq!(from_full, reference);
    assert_ne!(from_full.x_mean, from_train.x_mean);
}

#[test]
fn valid_part_is_standardized_too() {
    let split = bnn_data::train_valid_test_split(&irregular(60), 0.2, 0.2, 1).unwrap();
    let (standardized, s) = standardize_split(&split, StatsSource::TrainingSplit).unwrap();
    let valid = standardized.valid.unwrap();
    assert_eq!(valid.x, s.transform_x(&split.valid.unwrap().x));
}

#[test]
fn constant_training_column_is_an_error_naming_it() {
    // Feature "b" is 0 on the first 8 rows (the training part) and 1 on the last 2.
    let mut data = irregular(10);
    for i in 0..10 {
        data.x.data[i * 2 + 1] = if i < 8 { 0.0 } else { 1.0 };
    }
    let split = split_at_row(&data, 8).unwrap();
    let err = standardize_split(&split, StatsSource::TrainingSplit).unwrap_err();
    assert!(
        matches!(err, DataError::ZeroSpread { role: ColumnRole::Feature, column: 2, ref name, .. } if name == "b"),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("\"b\"") && message.contains("training split"),
        "{message}"
    );
    assert!(standardize_split(&split, StatsSource::FullData).is_ok());
}

#[test]
fn equal_values_with_rounding_still_count_as_zero_spread() {
    // 0.1 three times has a rounded mean != 0.1, so a naive sd check would see ~1e-17.
    let x = Matrix::new(3, 1, vec![0.1, 0.1, 0.1]);
    let y = Matrix::new(3, 1, vec![1.0, 2.0, 3.0]);
    assert!(matches!(
        Standardizer::fit(&x, &y),
        Err(DataError::ZeroSpread { .. })
    ));
}

#[test]
#[should_panic(expected = "fitted on 2 columns")]
fn transform_with_wrong_width_panics() {
    let data = irregular(10);
    let s = Standardizer::fit(&data.x, &data.y).unwrap();
    s.transform_x(&Matrix::zeros(1, 3));
}

//! Seeded splits: sizes, partition property, determinism and the failure cases.

use bnn_data::{
    split_at_row, train_test_split, train_valid_test_split, DataError, Dataset, Matrix, Split,
    DEFAULT_TEST_FRACTION,
};

/// `n` rows with x = (i, i²) and y = 3i + 1, so every row is identifiable by its values.
fn numbered(n: usize) -> Dataset {
    let x = (0..n).flat_map(|i| [i as f64, (i * i) as f64]).collect();
    let y = (0..n).map(|i| 3.0 * i as f64 + 1.0).collect();
    Dataset {
        name: "numbered".into(),
        source: "test".into(),
        feature_names: vec!["i".into(), "i2".into()],
        target_names: vec!["y".into()],
        x: Matrix::new(n, 2, x),
        y: Matrix::new(n, 1, y),
    }
}

fn assert_partition(split: &Split, n: usize) {
    let mut all: Vec<usize> = split
        .train_indices
        .iter()
        .chain(&split.valid_indices)
        .chain(&split.test_indices)
        .copied()
        .collect();
    all.sort_unstable();
    assert_eq!(
        all,
        (0..n).collect::<Vec<_>>(),
        "parts must be disjoint and cover every row"
    );
}

fn assert_rows_match_indices(part: &Dataset, indices: &[usize], whole: &Dataset) {
    assert_eq!(part.n_rows(), indices.len());
    for (k, &i) in indices.iter().enumerate() {
        assert_eq!(part.x.row(k), whole.x.row(i));
        assert_eq!(part.y.row(k), whole.y.row(i));
    }
}

#[test]
fn test_part_has_round_n_times_fraction_rows() {
    // 308 * 0.2 = 61.6 -> 62; 10 * 0.25 = 2.5 -> 3 (halves round away from zero).
    let split = train_test_split(&numbered(308), DEFAULT_TEST_FRACTION, 1).unwrap();
    assert_eq!((split.train.n_rows(), split.test.n_rows()), (246, 62));
    let split = train_test_split(&numbered(10), 0.25, 1).unwrap();
    assert_eq!((split.train.n_rows(), split.test.n_rows()), (7, 3));
    assert!(split.valid.is_none() && split.valid_indices.is_empty());
}

#[test]
fn parts_are_disjoint_cover_all_rows_and_carry_the_right_rows() {
    let data = numbered(57);
    let split = train_valid_test_split(&data, 0.15, 0.2, 3).unwrap();
    assert_partition(&split, 57);
    assert_rows_match_indices(&split.train, &split.train_indices, &data);
    assert_rows_match_indices(split.valid.as_ref().unwrap(), &split.valid_indices, &data);
    assert_rows_match_indices(&split.test, &split.test_indices, &data);
    for indices in [
        &split.train_indices,
        &split.valid_indices,
        &split.test_indices,
    ] {
        assert!(
            indices.windows(2).all(|w| w[0] < w[1]),
            "rows keep their original order"
        );
    }
}

#[test]
fn train_valid_test_sizes() {
    let split = train_valid_test_split(&numbered(100), 0.1, 0.2, 0).unwrap();
    assert_eq!(
        (
            split.train.n_rows(),
            split.valid.as_ref().unwrap().n_rows(),
            split.test.n_rows()
        ),
        (70, 10, 20)
    );
}

#[test]
fn same_seed_same_split_other_seed_other_split() {
    let data = numbered(200);
    let a = train_test_split(&data, 0.2, 11).unwrap();
    let b = train_test_split(&data, 0.2, 11).unwrap();
    let c = train_test_split(&data, 0.2, 12).unwrap();
    assert_eq!(a, b);
    assert_ne!(a.test_indices, c.test_indices);
}

#[test]
fn split_is_not_the_identity_order() {
    // A shuffle that did nothing would put the last 40 rows in the test part.
    let split = train_test_split(&numbered(200), 0.2, 5).unwrap();
    assert_ne!(split.test_indices, (160..200).collect::<Vec<_>>());
}

#[test]
fn tiny_datasets_keep_one_test_row_and_two_training_rows() {
    let split = train_test_split(&numbered(3), 0.01, 0).unwrap();
    assert_eq!((split.train.n_rows(), split.test.n_rows()), (2, 1));

    let err = train_test_split(&numbered(2), 0.2, 0).unwrap_err();
    assert!(
        matches!(
            err,
            DataError::TooFewRows {
                rows: 2,
                needed: 3,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("\"numbered\" has 2 rows"), "{err}");

    let err = train_valid_test_split(&numbered(3), 0.1, 0.1, 0).unwrap_err();
    assert!(
        matches!(
            err,
            DataError::TooFewRows {
                rows: 3,
                needed: 4,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn fractions_outside_the_open_unit_interval_are_rejected() {
    let data = numbered(50);
    for bad in [0.0, 1.0, -0.2, 1.5, f64::NAN] {
        let err = train_test_split(&data, bad, 0).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::InvalidParameter {
                    name: "test_fraction",
                    ..
                }
            ),
            "{bad}: {err:?}"
        );
    }
    let err = train_valid_test_split(&data, 0.5, 0.5, 0).unwrap_err();
    assert!(matches!(err, DataError::InvalidParameter { .. }), "{err:?}");
    assert!(err.to_string().contains("below 1"));
}

#[test]
fn split_at_row_uses_leading_rows_for_training() {
    let data = numbered(10);
    let split = split_at_row(&data, 7).unwrap();
    assert_eq!(split.train_indices, (0..7).collect::<Vec<_>>());
    assert_eq!(split.test_indices, vec![7, 8, 9]);
    assert_rows_match_indices(&split.test, &split.test_indices, &data);
    assert!(matches!(
        split_at_row(&data, 10),
        Err(DataError::TooFewRows { .. })
    ));
    assert!(matches!(
        split_at_row(&data, 1),
        Err(DataError::TooFewRows { .. })
    ));
}

#[test]
fn original_rows_reassembles_the_dataset() {
    let data = numbered(31);
    let split = train_valid_test_split(&data, 0.2, 0.2, 9).unwrap();
    assert_eq!(split.original_rows(), data);
}

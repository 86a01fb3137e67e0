//! `describe`: per-column statistics, target quantiles and the printed table.

use bnn_data::{describe, ColumnRole, Dataset, Matrix};

fn small() -> Dataset {
    Dataset {
        name: "small".into(),
        source: "test.csv".into(),
        feature_names: vec!["width".into()],
        target_names: vec!["price".into()],
        x: Matrix::new(5, 1, vec![2.0, 4.0, 4.0, 4.0, 6.0]),
        y: Matrix::new(5, 1, vec![10.0, 20.0, 30.0, 40.0, 50.0]),
    }
}

#[test]
fn column_statistics() {
    let s = describe(&small());
    assert_eq!((s.rows, s.features, s.targets), (5, 1, 1));
    let width = &s.columns[0];
    assert_eq!(width.role, ColumnRole::Feature);
    assert_eq!((width.min, width.mean, width.max), (2.0, 4.0, 6.0));
    // Squared deviations 4 + 0 + 0 + 0 + 4 = 8 over n = 5.
    assert!((width.sd - (8.0f64 / 5.0).sqrt()).abs() < 1e-15);
    assert_eq!(s.columns[1].role, ColumnRole::Target);
}

#[test]
fn target_quantiles_interpolate() {
    let s = describe(&small());
    let q = &s.target_quantiles[0];
    assert_eq!(q.name, "price");
    // Positions p * 4 on 10..50 in steps of 10: 5% -> 12, 25% -> 20, 50% -> 30, 95% -> 48.
    let values: Vec<f64> = q.quantiles.iter().map(|&(_, v)| v).collect();
    let expected = [12.0, 20.0, 30.0, 40.0, 48.0];
    for (v, e) in values.iter().zip(expected) {
        assert!((v - e).abs() < 1e-12, "{values:?}");
    }
}

#[test]
fn table_names_every_column_and_statistic() {
    let text = describe(&small()).to_string();
    for needle in [
        "small",
        "test.csv",
        "rows      5",
        "width",
        "price",
        "mean",
        "sd",
        "50%",
        "48.0000",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

//! The named UCI benchmarks load from the shared data folder with the manifest's shape and
//! checksum; missing or corrupted copies are refused.
//!
//! The tests that read the data folder (`../shared/datasets` beside the checkout, or
//! `BNN_DATA_DIR`) say they are skipped when it is missing; `BNN_REQUIRE_DATA=1` makes that a
//! failure.

use std::path::Path;

use bnn_data::{list_named, load_named, load_named_from, require_data_dir, sha256_file, DataError};

#[test]
fn every_named_dataset_loads_with_the_manifest_shape() {
    let Some(dir) = require_data_dir("every_named_dataset_loads_with_the_manifest_shape") else {
        return;
    };
    for entry in list_named() {
        let d = load_named_from(&dir, &entry.name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(d.name, entry.name);
        assert_eq!(d.n_rows(), entry.rows, "{}", entry.name);
        assert_eq!(d.n_features(), entry.features, "{}", entry.name);
        assert_eq!(d.feature_names.len(), entry.features);
        assert_eq!(
            d.target_names,
            std::slice::from_ref(&entry.target),
            "{}",
            entry.name
        );
        assert!(!d.feature_names.contains(&entry.target));
        assert!(Path::new(&d.source).ends_with(&entry.file), "{}", d.source);
    }
}

#[test]
fn airfoil_first_row_has_the_published_values() {
    let Some(dir) = require_data_dir("airfoil_first_row_has_the_published_values") else {
        return;
    };
    let d = load_named_from(&dir, "airfoil").unwrap();
    // First line of UCI's airfoil_self_noise.dat: 800 0 0.3048 71.3 0.00266337 126.201
    assert_eq!(d.x.row(0), &[800.0, 0.0, 0.3048, 71.3, 0.00266337]);
    assert_eq!(d.y.row(0), &[126.201]);
}

#[test]
fn load_named_finds_the_data_folder_by_itself() {
    if require_data_dir("load_named_finds_the_data_folder_by_itself").is_none() {
        return;
    }
    let d = load_named("yacht").unwrap();
    assert_eq!((d.n_rows(), d.n_features()), (308, 6));
}

#[test]
fn corrupted_copy_fails_the_checksum() {
    let Some(dir) = require_data_dir("corrupted_copy_fails_the_checksum") else {
        return;
    };
    let entry = list_named().iter().find(|d| d.name == "yacht").unwrap();
    let original = std::fs::read_to_string(dir.join("yacht").join("yacht.csv")).unwrap();
    // Change one value; the file still parses, so only the checksum can catch it.
    let corrupted = original.replacen("0.568", "0.569", 1);
    assert_ne!(corrupted, original);

    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("yacht")).unwrap();
    let copy = tmp.path().join("yacht").join("yacht.csv");
    std::fs::write(&copy, corrupted).unwrap();

    let err = load_named_from(tmp.path(), "yacht").unwrap_err();
    let actual = sha256_file(&copy).unwrap();
    match &err {
        DataError::ChecksumMismatch {
            expected,
            actual: found,
            ..
        } => {
            assert_eq!(expected, &entry.sha256);
            assert_eq!(found, &actual);
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&entry.sha256) && message.contains(&actual),
        "{message}"
    );
}

#[test]
fn missing_file_says_how_to_get_it() {
    let tmp = tempfile::tempdir().unwrap();
    let err = load_named_from(tmp.path(), "concrete").unwrap_err();
    assert!(matches!(err, DataError::DataFileMissing { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("concrete.csv")
            && message.contains("fetch.py")
            && message.contains("BNN_DATA_DIR")
    );
}

#[test]
fn unknown_name_lists_the_known_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let err = load_named_from(tmp.path(), "boston").unwrap_err();
    assert!(matches!(err, DataError::UnknownDataset { .. }), "{err:?}");
    assert!(err.to_string().contains("\"wine-quality-red\""));
}

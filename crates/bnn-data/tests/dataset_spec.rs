//! Resolving a dataset argument: benchmark name, generator name or CSV path.

use bnn_data::{
    load_dataset, robot_arm, split_at_row, CsvOptions, DataError, DatasetSpec, COS2X_DEFAULT_ROWS,
    FRIEDMAN1_DEFAULT_ROWS,
};

#[test]
fn benchmark_and_generator_names_resolve() {
    assert!(matches!(DatasetSpec::parse("protein"), Ok(DatasetSpec::Named(e)) if e.rows == 45730));
    assert_eq!(DatasetSpec::parse("cos2x").unwrap(), DatasetSpec::Cos2x);
    assert_eq!(
        DatasetSpec::parse("robot-arm").unwrap(),
        DatasetSpec::RobotArm
    );
    assert_eq!(load_dataset("cos2x").unwrap().n_rows(), COS2X_DEFAULT_ROWS);
}

#[test]
fn friedman1_takes_its_size_from_the_name_and_refuses_a_bad_one() {
    assert_eq!(
        DatasetSpec::parse("friedman1").unwrap(),
        DatasetSpec::Friedman1 {
            rows: FRIEDMAN1_DEFAULT_ROWS
        }
    );
    assert_eq!(
        DatasetSpec::parse("friedman1:200_000").unwrap(),
        DatasetSpec::Friedman1 { rows: 200_000 }
    );
    let data = load_dataset("friedman1:300").unwrap();
    assert_eq!((data.n_rows(), data.x.cols), (300, 10));
    for bad in ["friedman1:0", "friedman1:", "friedman1:2e5", "friedman1:-4"] {
        let message = DatasetSpec::parse(bad).unwrap_err().to_string();
        assert!(
            message.contains(bad) && message.contains("whole number"),
            "{bad}: {message}"
        );
    }
}

#[test]
fn robot_arm_spec_carries_its_canonical_split() {
    let spec = DatasetSpec::parse("robot-arm").unwrap();
    let stacked = spec.load(6, &CsvOptions::default()).unwrap();
    assert_eq!(stacked.n_rows(), 400);
    let n_train = spec.predefined_train_rows().unwrap();
    let split = split_at_row(&stacked, n_train).unwrap();
    let (train, test) = robot_arm(6);
    assert_eq!(split.train.x, train.x);
    assert_eq!(split.test.y, test.y);
    assert_eq!(DatasetSpec::Cos2x.predefined_train_rows(), None);
}

#[test]
fn existing_path_loads_as_csv() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.csv");
    std::fs::write(&path, "a,y\n1,2\n3,5\n").unwrap();
    let spec = path.to_str().unwrap();
    assert_eq!(
        DatasetSpec::parse(spec).unwrap(),
        DatasetSpec::CsvFile(path.clone())
    );
    assert_eq!(load_dataset(spec).unwrap().name, "mine");
}

#[test]
fn unknown_spec_lists_every_known_name() {
    let err = load_dataset("no-such-dataset.csv").unwrap_err();
    assert!(matches!(err, DataError::UnresolvedSpec { .. }), "{err:?}");
    let message = err.to_string();
    for name in ["\"airfoil\"", "\"yacht\"", "\"cos2x\"", "\"robot-arm\""] {
        assert!(message.contains(name), "{message}");
    }
}

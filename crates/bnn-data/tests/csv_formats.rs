//! Separators, quoting and target placement that `load_csv` must accept.

use std::path::PathBuf;

use bnn_data::{load_csv, CsvOptions, Delimiter, Matrix, TargetColumn};

fn write_temp(name: &str, contents: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, contents).unwrap();
    (dir, path)
}

#[test]
fn comma_file_with_crlf_and_bom_loads_target_last() {
    let (_dir, path) = write_temp("plain.csv", "\u{feff}a,b,y\r\n1,2,3\r\n4,5,6.5\r\n");
    let d = load_csv(&path, &CsvOptions::default()).unwrap();
    assert_eq!(d.name, "plain");
    assert_eq!(d.feature_names, ["a", "b"]);
    assert_eq!(d.target_names, ["y"]);
    assert_eq!(d.x, Matrix::new(2, 2, vec![1.0, 2.0, 4.0, 5.0]));
    assert_eq!(d.y, Matrix::new(2, 1, vec![3.0, 6.5]));
}

#[test]
fn whitespace_separated_file_with_ragged_spacing() {
    let (_dir, path) = write_temp(
        "yacht.data",
        "lcb  cp\tfroude y\n-2.3 0.568  0.125 0.11 \n-2.4\t0.569 0.150 0.27\n\n",
    );
    let d = load_csv(&path, &CsvOptions::default()).unwrap();
    assert_eq!(d.feature_names, ["lcb", "cp", "froude"]);
    assert_eq!(d.x.row(1), &[-2.4, 0.569, 0.15]);
    assert_eq!(d.y.column(0), vec![0.11, 0.27]);
}

#[test]
fn semicolon_file_with_quoted_header() {
    let (_dir, path) = write_temp(
        "wine.csv",
        "\"fixed acidity\";\"volatile acidity\";\"quality\"\n7.4;0.7;5\n7.8;0.88;6\n",
    );
    let d = load_csv(&path, &CsvOptions::default()).unwrap();
    assert_eq!(d.feature_names, ["fixed acidity", "volatile acidity"]);
    assert_eq!(d.target_names, ["quality"]);
    assert_eq!(d.x.row(1), &[7.8, 0.88]);
}

#[test]
fn named_target_in_the_middle_is_removed_from_features() {
    let (_dir, path) = write_temp(
        "casp.csv",
        "\"F1\",\"RMSD\",\"F2\"\n10,1.5,100\n20,2.5,200\n30,3.5,300\n",
    );
    let opts = CsvOptions {
        target: TargetColumn::Named("RMSD".into()),
        ..CsvOptions::default()
    };
    let d = load_csv(&path, &opts).unwrap();
    assert_eq!(d.feature_names, ["F1", "F2"]);
    assert_eq!(d.target_names, ["RMSD"]);
    assert_eq!(
        d.x,
        Matrix::new(3, 2, vec![10.0, 100.0, 20.0, 200.0, 30.0, 300.0])
    );
    assert_eq!(d.y.column(0), vec![1.5, 2.5, 3.5]);
}

#[test]
fn named_target_in_first_column() {
    let (_dir, path) = write_temp("first.csv", "y,a,b\n1,2,3\n4,5,7\n");
    let opts = CsvOptions {
        target: TargetColumn::Named("y".into()),
        ..CsvOptions::default()
    };
    let d = load_csv(&path, &opts).unwrap();
    assert_eq!(d.feature_names, ["a", "b"]);
    assert_eq!(d.y.column(0), vec![1.0, 4.0]);
    assert_eq!(d.x.row(1), &[5.0, 7.0]);
}

#[test]
fn several_named_targets_become_y_columns_in_the_order_given() {
    // Targets listed against the file's column order; the features keep theirs.
    let (_dir, path) = write_temp(
        "arm.csv",
        "y2,x1,y1,x2\n0.5,1,10,2\n0.6,3,30,4\n0.7,5,50,6\n",
    );
    let opts = CsvOptions {
        target: TargetColumn::from_names(&["y1".to_string(), "y2".to_string()]),
        ..CsvOptions::default()
    };
    let d = load_csv(&path, &opts).unwrap();
    assert_eq!(d.target_names, ["y1", "y2"]);
    assert_eq!(d.feature_names, ["x1", "x2"]);
    assert_eq!(
        d.y,
        Matrix::new(3, 2, vec![10.0, 0.5, 30.0, 0.6, 50.0, 0.7])
    );
    assert_eq!(d.x, Matrix::new(3, 2, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    assert_eq!(TargetColumn::from_names(&[]), TargetColumn::Last);
    assert_eq!(
        TargetColumn::from_names(&["y".to_string()]),
        TargetColumn::Named("y".into())
    );
}

#[test]
fn explicit_delimiters_override_auto() {
    // Auto would pick the comma in the header; the file is really tab-separated.
    let (_dir, path) = write_temp("tabs.tsv", "a,1\tb\ty\n1\t2\t3\n4\t5\t7\n");
    let opts = CsvOptions {
        delimiter: Delimiter::Char(b'\t'),
        ..CsvOptions::default()
    };
    let d = load_csv(&path, &opts).unwrap();
    assert_eq!(d.feature_names, ["a,1", "b"]);

    let (_dir, path) = write_temp("ws.txt", "a b y\n1 2 3\n4 5 7\n");
    let opts = CsvOptions {
        delimiter: Delimiter::Whitespace,
        ..CsvOptions::default()
    };
    assert_eq!(load_csv(&path, &opts).unwrap().n_features(), 2);
}

#[test]
fn scientific_notation_and_signs_parse() {
    let (_dir, path) = write_temp("sci.csv", "a,y\n1e-3,+2\n-4.5E2,.5\n");
    let d = load_csv(&path, &CsvOptions::default()).unwrap();
    assert_eq!(d.x.column(0), vec![0.001, -450.0]);
    assert_eq!(d.y.column(0), vec![2.0, 0.5]);
}

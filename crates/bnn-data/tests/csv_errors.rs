//! Every kind of malformed CSV input gives its own error naming file, line and column.

use std::path::PathBuf;

use bnn_data::{load_csv, ColumnRole, CsvOptions, DataError, TargetColumn};

/// Writes `contents` to a fresh temp folder; the folder lives as long as the returned guard.
fn write_temp(contents: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("input.csv");
    std::fs::write(&path, contents).unwrap();
    (dir, path)
}

fn load_err(contents: &str) -> (DataError, String, PathBuf, tempfile::TempDir) {
    let (dir, path) = write_temp(contents.as_bytes());
    let err = load_csv(&path, &CsvOptions::default()).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&path.display().to_string()),
        "message does not name the file: {message}"
    );
    (err, message, path, dir)
}

#[test]
fn ragged_row_names_line_and_counts() {
    let (err, message, ..) = load_err("a,b,y\n1,2,3\n4,5\n");
    assert!(
        matches!(
            err,
            DataError::RaggedRow {
                line: 3,
                expected: 3,
                found: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        message.contains("line 3")
            && message.contains("expected 3 fields")
            && message.contains("found 2")
    );
}

#[test]
fn non_numeric_cell_shows_text_line_and_column() {
    let (err, message, ..) = load_err("a,b,y\n1,2,3\n4,abc,6\n");
    assert!(
        matches!(
            err,
            DataError::NonNumeric {
                line: 3,
                column: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        message.contains("line 3") && message.contains("column 2") && message.contains("\"b\"")
    );
    assert!(message.contains("\"abc\""), "{message}");
}

#[test]
fn empty_cell_is_called_empty() {
    let (err, message, ..) = load_err("a,b,y\n1,,3\n4,5,6\n");
    assert!(
        matches!(err, DataError::NonNumeric { line: 2, column: 2, ref text, .. } if text.is_empty())
    );
    assert!(message.contains("empty"), "{message}");
}

#[test]
fn nan_and_infinite_cells_are_rejected() {
    for bad in ["NaN", "inf", "-Infinity"] {
        let (err, message, ..) = load_err(&format!("a,y\n1,2\n{bad},3\n"));
        assert!(
            matches!(
                err,
                DataError::NonFinite {
                    line: 3,
                    column: 1,
                    ..
                }
            ),
            "{bad}: {err:?}"
        );
        assert!(
            message.contains("NaN or infinite") && message.contains(bad),
            "{message}"
        );
    }
}

#[test]
fn empty_file_and_blank_file_are_rejected() {
    for contents in ["", "\n  \n"] {
        let (err, message, ..) = load_err(contents);
        assert!(matches!(err, DataError::EmptyFile { .. }), "{err:?}");
        assert!(message.contains("empty"));
    }
}

#[test]
fn header_only_file_is_rejected() {
    let (err, message, ..) = load_err("a,b,y\n\n");
    assert!(
        matches!(err, DataError::NoDataRows { header_line: 1, .. }),
        "{err:?}"
    );
    assert!(message.contains("no data rows"));
}

#[test]
fn constant_feature_and_constant_target_are_named() {
    let (err, message, ..) = load_err("a,b,y\n1,7,3\n2,7,4\n3,7,5\n");
    assert!(
        matches!(err, DataError::ConstantColumn { role: ColumnRole::Feature, column: 2, ref name, .. } if name == "b"),
        "{err:?}"
    );
    assert!(
        message.contains("\"b\"") && message.contains("divide by zero"),
        "{message}"
    );

    let (err, message, ..) = load_err("a,b,y\n1,7,3\n2,8,3\n");
    assert!(
        matches!(err, DataError::ConstantColumn { role: ColumnRole::Target, ref name, .. } if name == "y")
    );
    assert!(message.contains("target column"), "{message}");
}

#[test]
fn unknown_target_lists_available_columns() {
    let (_dir, path) = write_temp(b"a,b,y\n1,2,3\n4,5,7\n");
    let opts = CsvOptions {
        target: TargetColumn::Named("price".into()),
        ..CsvOptions::default()
    };
    let err = load_csv(&path, &opts).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, DataError::UnknownTarget { .. }), "{err:?}");
    assert!(
        message.contains("\"price\"") && message.contains("\"a\", \"b\", \"y\""),
        "{message}"
    );
}

#[test]
fn duplicate_header_names_both_columns() {
    let (err, message, ..) = load_err("a,b,a,y\n1,2,3,4\n5,6,7,9\n");
    assert!(
        matches!(err, DataError::DuplicateColumnName { line: 1, first: 1, second: 3, ref name, .. } if name == "a"),
        "{err:?}"
    );
    assert!(message.contains("columns 1 and 3"), "{message}");
}

#[test]
fn empty_header_name_is_rejected() {
    let (err, message, ..) = load_err("a,,y\n1,2,3\n4,5,7\n");
    assert!(
        matches!(
            err,
            DataError::EmptyColumnName {
                line: 1,
                column: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(message.contains("column 2"));
}

#[test]
fn single_column_file_has_no_features() {
    let (err, ..) = load_err("y\n1\n2\n");
    assert!(matches!(err, DataError::NoFeatureColumns { .. }), "{err:?}");
}

#[test]
fn target_lists_that_cannot_work_are_named() {
    let (_dir, path) = write_temp(b"a,b,y\n1,2,3\n4,5,7\n");
    let with = |names: &[&str]| {
        let target = TargetColumn::Columns(names.iter().map(|n| n.to_string()).collect());
        load_csv(
            &path,
            &CsvOptions {
                target,
                ..CsvOptions::default()
            },
        )
        .unwrap_err()
    };
    let err = with(&["y", "b", "y"]);
    assert!(
        matches!(err, DataError::RepeatedTarget { ref target, .. } if target == "y"),
        "{err:?}"
    );
    let err = with(&["y", "nope"]);
    assert!(
        matches!(err, DataError::UnknownTarget { ref target, .. } if target == "nope"),
        "{err:?}"
    );
    assert!(matches!(with(&[]), DataError::NoTargetColumns { .. }));
    let err = with(&["a", "b", "y"]);
    assert!(matches!(err, DataError::NoFeatureColumns { .. }), "{err:?}");
    assert!(err.to_string().contains("\"a\", \"b\", \"y\""), "{err}");
}

#[test]
fn unterminated_quote_names_line() {
    let (err, message, ..) = load_err("\"a,b,y\n1,2,3\n");
    assert!(
        matches!(err, DataError::UnterminatedQuote { line: 1, .. }),
        "{err:?}"
    );
    assert!(message.contains("line 1"));
}

#[test]
fn non_utf8_bytes_name_the_line() {
    let (_dir, path) = write_temp(b"a,y\n1,2\n3,\xff\n");
    let err = load_csv(&path, &CsvOptions::default()).unwrap_err();
    assert!(matches!(err, DataError::NotUtf8 { line: 3, .. }), "{err:?}");
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.csv");
    let err = load_csv(&path, &CsvOptions::default()).unwrap_err();
    assert!(matches!(err, DataError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("absent.csv"));
}

#[test]
fn line_numbers_count_skipped_blank_lines() {
    let (err, ..) = load_err("\na,y\n\n1,2\n\n3,x\n");
    assert!(
        matches!(
            err,
            DataError::NonNumeric {
                line: 6,
                column: 2,
                ..
            }
        ),
        "{err:?}"
    );
}

//! Loading a delimited text file with a header row into a validated [`Dataset`].

use std::collections::HashMap;
use std::path::Path;

use crate::dataset::Dataset;
use crate::delimiter::{split_fields, Delimiter, Separator};
use crate::error::DataError;
use crate::matrix::Matrix;

/// Which columns hold the regression targets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TargetColumn {
    /// The last column, the convention of every UCI benchmark file here.
    #[default]
    Last,
    /// The column with this header name; it may be anywhere, and is removed from the features.
    Named(String),
    /// Several targets: these columns, in this order, become `y`'s columns (regression with
    /// several outputs); the others are the features.
    Columns(Vec<String>),
}

impl TargetColumn {
    /// The choice that `names` (header names, as a user lists them) make: none is the last
    /// column, one is [`TargetColumn::Named`], more are [`TargetColumn::Columns`].
    pub fn from_names(names: &[String]) -> Self {
        match names {
            [] => TargetColumn::Last,
            [one] => TargetColumn::Named(one.clone()),
            many => TargetColumn::Columns(many.to_vec()),
        }
    }
}

/// How to read a CSV-like file. The default reads a comma, `;` or whitespace separated file
/// with the target in the last column.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CsvOptions {
    pub target: TargetColumn,
    pub delimiter: Delimiter,
}

/// Reads `path`: one header row, then one row of finite numbers per example.
///
/// Blank lines are skipped; a UTF-8 byte-order mark and CRLF line ends are accepted. The
/// dataset is named after the file stem. Constant columns are rejected, because the samplers
/// work on standardized data.
pub fn load_csv(path: &Path, opts: &CsvOptions) -> Result<Dataset, DataError> {
    let bytes = std::fs::read(path).map_err(|cause| DataError::Io {
        path: path.to_path_buf(),
        cause,
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        DataError::NotUtf8 {
            path: path.to_path_buf(),
            line: 1 + valid.iter().filter(|&&b| b == b'\n').count(),
        }
    })?;
    let name = path
        .file_stem()
        .map_or_else(|| "data".to_string(), |s| s.to_string_lossy().into_owned());
    parse_csv(&text, path, &name, opts)
}

/// Parses CSV text; `path` is only used to label errors and the dataset's source.
pub fn parse_csv(
    text: &str,
    path: &Path,
    name: &str,
    opts: &CsvOptions,
) -> Result<Dataset, DataError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line))
        .filter(|(_, line)| !line.trim().is_empty());

    let (header_line, header_text) = lines.next().ok_or_else(|| DataError::EmptyFile {
        path: path.to_path_buf(),
    })?;
    let separator = opts.delimiter.resolve(header_text);
    let header = Header::parse(header_text, header_line, separator, path)?;
    let target_indices = header.target_indices(&opts.target, path)?;

    let n_cols = header.names.len();
    let mut x_data = Vec::new();
    let mut y_data = Vec::new();
    let mut n_rows = 0;
    for (line, line_text) in lines {
        let fields =
            split_fields(line_text, separator).map_err(|_| DataError::UnterminatedQuote {
                path: path.to_path_buf(),
                line,
            })?;
        if fields.len() != n_cols {
            return Err(DataError::RaggedRow {
                path: path.to_path_buf(),
                line,
                expected: n_cols,
                found: fields.len(),
            });
        }
        let row_start = y_data.len();
        y_data.resize(row_start + target_indices.len(), 0.0);
        for (j, field) in fields.iter().enumerate() {
            let value = parse_cell(field, line, j, &header.names[j], path)?;
            match target_indices.iter().position(|&t| t == j) {
                Some(k) => y_data[row_start + k] = value,
                None => x_data.push(value),
            }
        }
        n_rows += 1;
    }
    if n_rows == 0 {
        return Err(DataError::NoDataRows {
            path: path.to_path_buf(),
            header_line,
        });
    }

    let target_names: Vec<String> = target_indices
        .iter()
        .map(|&j| header.names[j].clone())
        .collect();
    let feature_names: Vec<String> = header
        .names
        .into_iter()
        .enumerate()
        .filter(|(j, _)| !target_indices.contains(j))
        .map(|(_, n)| n)
        .collect();
    let dataset = Dataset {
        name: name.to_string(),
        source: path.display().to_string(),
        x: Matrix::new(n_rows, feature_names.len(), x_data),
        y: Matrix::new(n_rows, target_names.len(), y_data),
        feature_names,
        target_names,
    };
    dataset.check_no_constant_columns()?;
    Ok(dataset)
}

/// The validated column names of the header row.
struct Header {
    names: Vec<String>,
    line: usize,
}

impl Header {
    fn parse(
        text: &str,
        line: usize,
        separator: Separator,
        path: &Path,
    ) -> Result<Self, DataError> {
        let fields = split_fields(text, separator).map_err(|_| DataError::UnterminatedQuote {
            path: path.to_path_buf(),
            line,
        })?;
        let names: Vec<String> = fields.into_iter().map(|f| f.into_owned()).collect();
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (j, name) in names.iter().enumerate() {
            if name.is_empty() {
                return Err(DataError::EmptyColumnName {
                    path: path.to_path_buf(),
                    line,
                    column: j + 1,
                });
            }
            if let Some(&first) = seen.get(name.as_str()) {
                return Err(DataError::DuplicateColumnName {
                    path: path.to_path_buf(),
                    line,
                    name: name.clone(),
                    first: first + 1,
                    second: j + 1,
                });
            }
            seen.insert(name, j);
        }
        Ok(Self { names, line })
    }

    /// The target columns' indices, in the order the targets were named.
    fn target_indices(&self, target: &TargetColumn, path: &Path) -> Result<Vec<usize>, DataError> {
        let index_of = |wanted: &String| {
            self.names
                .iter()
                .position(|n| n == wanted)
                .ok_or_else(|| DataError::UnknownTarget {
                    path: path.to_path_buf(),
                    target: wanted.clone(),
                    available: self.names.clone(),
                })
        };
        let indices = match target {
            TargetColumn::Last => vec![self.names.len() - 1],
            TargetColumn::Named(wanted) => vec![index_of(wanted)?],
            TargetColumn::Columns(wanted) => {
                if wanted.is_empty() {
                    return Err(DataError::NoTargetColumns {
                        path: path.to_path_buf(),
                    });
                }
                let mut indices = Vec::with_capacity(wanted.len());
                for name in wanted {
                    let index = index_of(name)?;
                    if indices.contains(&index) {
                        return Err(DataError::RepeatedTarget {
                            path: path.to_path_buf(),
                            target: name.clone(),
                        });
                    }
                    indices.push(index);
                }
                indices
            }
        };
        if self.names.len() <= indices.len() {
            return Err(DataError::NoFeatureColumns {
                path: path.to_path_buf(),
                line: self.line,
                target: indices
                    .iter()
                    .map(|&j| self.names[j].as_str())
                    .collect::<Vec<_>>()
                    .join("\", \""),
            });
        }
        Ok(indices)
    }
}

fn parse_cell(
    field: &str,
    line: usize,
    j: usize,
    name: &str,
    path: &Path,
) -> Result<f64, DataError> {
    let value: f64 = field.parse().map_err(|_| DataError::NonNumeric {
        path: path.to_path_buf(),
        line,
        column: j + 1,
        name: name.to_string(),
        text: field.to_string(),
    })?;
    if !value.is_finite() {
        return Err(DataError::NonFinite {
            path: path.to_path_buf(),
            line,
            column: j + 1,
            name: name.to_string(),
            text: field.to_string(),
        });
    }
    Ok(value)
}

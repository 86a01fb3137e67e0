//! Reads the numeric CSV files of a run directory, keeping only the columns a plot needs.
//!
//! Draws files can hold thousands of parameter columns, so a plot parses just the ones it
//! asks for; every row is still checked for its field count so that a truncated or garbled
//! line is reported (file and line) rather than silently misread.

use crate::PlotError;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// The header and selected columns of one CSV file, values parsed as `f64`.
pub(crate) struct NumericCsv {
    file: PathBuf,
    header: Vec<String>,
    /// Header position of each kept column, parallel to `columns`.
    kept: Vec<usize>,
    columns: Vec<Vec<f64>>,
    /// 1-based source line of each row, for error messages about values.
    lines: Vec<usize>,
}

/// Lines that carry no data: CmdStan comments (`# Adaptation terminated`, timing) and blanks.
fn is_skipped(line: &str) -> bool {
    let line = line.trim_start();
    line.is_empty() || line.starts_with('#')
}

fn split(line: &str) -> impl Iterator<Item = &str> {
    line.trim_end_matches(['\r', '\n'])
        .split(',')
        .map(str::trim)
}

impl NumericCsv {
    /// Reads `path`, parsing the columns whose names satisfy `keep`.
    pub fn read(path: &Path, keep: impl Fn(&str) -> bool) -> Result<Self, PlotError> {
        let io_error = |cause| PlotError::Io {
            file: path.to_path_buf(),
            cause,
        };
        let reader = BufReader::new(File::open(path).map_err(io_error)?);
        let mut lines = reader.lines().enumerate().map(|(i, line)| (i + 1, line));

        let header = loop {
            match lines.next() {
                None => {
                    return Err(PlotError::NoHeader {
                        file: path.to_path_buf(),
                    })
                }
                Some((_, line)) => {
                    let line = line.map_err(io_error)?;
                    if !is_skipped(&line) {
                        break split(&line).map(str::to_string).collect::<Vec<_>>();
                    }
                }
            }
        };
        let kept: Vec<usize> = (0..header.len()).filter(|&i| keep(&header[i])).collect();
        let mut table = Self {
            file: path.to_path_buf(),
            columns: vec![Vec::new(); kept.len()],
            header,
            kept,
            lines: Vec::new(),
        };

        for (number, line) in lines {
            let line = line.map_err(io_error)?;
            if is_skipped(&line) {
                continue;
            }
            table.push_row(number, &line)?;
        }
        Ok(table)
    }

    /// Reads only the header row, to choose the columns before the full read.
    pub fn header(path: &Path) -> Result<Vec<String>, PlotError> {
        let io_error = |cause| PlotError::Io {
            file: path.to_path_buf(),
            cause,
        };
        let reader = BufReader::new(File::open(path).map_err(io_error)?);
        for line in reader.lines() {
            let line = line.map_err(io_error)?;
            if !is_skipped(&line) {
                return Ok(split(&line).map(str::to_string).collect());
            }
        }
        Err(PlotError::NoHeader {
            file: path.to_path_buf(),
        })
    }

    fn push_row(&mut self, number: usize, line: &str) -> Result<(), PlotError> {
        let fields: Vec<&str> = split(line).collect();
        if fields.len() != self.header.len() {
            return Err(self.malformed_line(
                number,
                format!(
                    "expected {} fields as in the header, found {}",
                    self.header.len(),
                    fields.len()
                ),
            ));
        }
        for (column, &at) in self.columns.iter_mut().zip(&self.kept) {
            let text = fields[at];
            let value = text.parse::<f64>().map_err(|_| PlotError::Malformed {
                file: self.file.clone(),
                line: number,
                message: format!("column `{}`: `{text}` is not a number", self.header[at]),
            })?;
            column.push(value);
        }
        self.lines.push(number);
        Ok(())
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    pub fn header_names(&self) -> &[String] {
        &self.header
    }

    pub fn rows(&self) -> usize {
        self.lines.len()
    }

    /// The values of a kept column; an error naming the file if the header lacks it.
    pub fn column(&self, name: &str) -> Result<&[f64], PlotError> {
        self.kept
            .iter()
            .position(|&at| self.header[at] == name)
            .map(|k| self.columns[k].as_slice())
            .ok_or_else(|| PlotError::MissingColumn {
                file: self.file.clone(),
                column: name.to_string(),
            })
    }

    /// An error about the value in data row `row` (0-based), reported at its source line.
    pub fn malformed(&self, row: usize, message: String) -> PlotError {
        self.malformed_line(self.lines[row], message)
    }

    fn malformed_line(&self, line: usize, message: String) -> PlotError {
        PlotError::Malformed {
            file: self.file.clone(),
            line,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(text: &str) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file
    }

    #[test]
    fn keeps_selected_columns_and_skips_comments() {
        let file = write("# model\na,b,c\n1,2,3\n# Adaptation terminated\n4,5,6\n\n");
        let table = NumericCsv::read(file.path(), |name| name != "b").unwrap();
        assert_eq!(table.rows(), 2);
        assert_eq!(table.column("a").unwrap(), [1.0, 4.0]);
        assert_eq!(table.column("c").unwrap(), [3.0, 6.0]);
        assert!(matches!(
            table.column("b"),
            Err(PlotError::MissingColumn { .. })
        ));
        assert!(matches!(
            table.column("z"),
            Err(PlotError::MissingColumn { .. })
        ));
    }

    #[test]
    fn reports_the_source_line_of_a_bad_value() {
        let file = write("# comment\na,b\n1,2\n3,oops\n");
        let err = NumericCsv::read(file.path(), |_| true).err().unwrap();
        assert!(matches!(err, PlotError::Malformed { line: 4, .. }), "{err}");
        assert!(
            err.to_string()
                .contains(":4: column `b`: `oops` is not a number"),
            "{err}"
        );
    }

    #[test]
    fn checks_field_counts_even_of_columns_not_kept() {
        let file = write("a,b,c\n1,2,3\n1,2\n");
        let err = NumericCsv::read(file.path(), |name| name == "a")
            .err()
            .unwrap();
        assert!(matches!(err, PlotError::Malformed { line: 3, .. }), "{err}");
    }

    #[test]
    fn header_only_reads_the_first_data_line() {
        let file = write("# c\nx0,y\n1,not-parsed\n");
        assert_eq!(NumericCsv::header(file.path()).unwrap(), ["x0", "y"]);
        let empty = write("# only a comment\n");
        assert!(matches!(
            NumericCsv::header(empty.path()),
            Err(PlotError::NoHeader { .. })
        ));
    }
}

//! Reads the numbers the plots need from `summary.json`, tolerating every other key.

use crate::PlotError;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The top-level object of `summary.json`.
pub(crate) struct RunSummary {
    file: PathBuf,
    fields: Map<String, Value>,
}

impl RunSummary {
    pub fn read(path: &Path) -> Result<Self, PlotError> {
        let file = path.to_path_buf();
        let text = std::fs::read_to_string(path).map_err(|cause| PlotError::Io {
            file: file.clone(),
            cause,
        })?;
        match serde_json::from_str(&text) {
            Ok(Value::Object(fields)) => Ok(Self { file, fields }),
            Ok(_) => Err(PlotError::InvalidField {
                file,
                field: "(top level)".into(),
                message: "must be a JSON object".into(),
            }),
            Err(cause) => Err(PlotError::Json { file, cause }),
        }
    }

    /// A numeric field; `None` when absent or `null` (e.g. `de_lppd` of a run without an ensemble);
    /// `"inf"` and `"-inf"` (an R-hat of stuck chains) are ±∞.
    pub fn number(&self, field: &str) -> Result<Option<f64>, PlotError> {
        match self.fields.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => bnn_diagnostics::non_finite_from_json(value)
                .map(Some)
                .ok_or_else(|| self.invalid(field, value)),
        }
    }

    /// `(nominal, observed)` coverage by nominal level: the `calibration` array
    /// (`[{"nominal": .., "observed": ..}, ..]`, every measured level) when present, else the
    /// `coverage_<percent>` fields.
    pub fn coverage(&self) -> Result<Vec<(f64, f64)>, PlotError> {
        if let Some(Value::Array(points)) = self.fields.get("calibration") {
            let mut levels = Vec::with_capacity(points.len());
            for point in points {
                match (
                    point.get("nominal").and_then(Value::as_f64),
                    point.get("observed").and_then(Value::as_f64),
                ) {
                    (Some(nominal), Some(observed)) => levels.push((nominal, observed)),
                    _ => {
                        return Err(PlotError::InvalidField {
                            file: self.file.clone(),
                            field: "calibration".into(),
                            message: format!(
                                "entries need numeric `nominal` and `observed`, found {point}"
                            ),
                        })
                    }
                }
            }
            if !levels.is_empty() {
                levels.sort_by(|a, b| a.0.total_cmp(&b.0));
                return Ok(levels);
            }
        }
        let mut levels = Vec::new();
        for key in self.fields.keys() {
            let Some(percent) = key
                .strip_prefix("coverage_")
                .and_then(|p| p.parse::<f64>().ok())
            else {
                continue;
            };
            if let Some(observed) = self.number(key)? {
                levels.push((percent / 100.0, observed));
            }
        }
        levels.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(levels)
    }

    fn invalid(&self, field: &str, value: &Value) -> PlotError {
        PlotError::InvalidField {
            file: self.file.clone(),
            field: field.to_string(),
            message: format!("should be a number, null, \"inf\" or \"-inf\", found {value}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn summary(text: &str) -> Result<RunSummary, PlotError> {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        RunSummary::read(file.path())
    }

    #[test]
    fn reads_numbers_nulls_and_coverage_levels() {
        let s = summary(
            r#"{"lppd": -1.5, "de_lppd": null, "coverage_90": 0.88, "coverage_50": 0.4,
                           "coverage_note": "x", "config": {"a": 1}}"#,
        )
        .unwrap();
        assert_eq!(s.number("lppd").unwrap(), Some(-1.5));
        assert_eq!(s.number("de_lppd").unwrap(), None);
        assert_eq!(s.number("missing").unwrap(), None);
        assert_eq!(s.coverage().unwrap(), [(0.5, 0.4), (0.9, 0.88)]);
        let stuck = summary(r#"{"rhat_test_loglik": "inf", "lppd": "-inf"}"#).unwrap();
        assert_eq!(
            stuck.number("rhat_test_loglik").unwrap(),
            Some(f64::INFINITY)
        );
        assert_eq!(stuck.number("lppd").unwrap(), Some(f64::NEG_INFINITY));
    }

    #[test]
    fn prefers_the_calibration_array() {
        let s = summary(
            r#"{"coverage_50": 0.4, "calibration": [{"nominal": 0.9, "observed": 0.8}, {"nominal": 0.1, "observed": 0.2}]}"#,
        )
        .unwrap();
        assert_eq!(s.coverage().unwrap(), [(0.1, 0.2), (0.9, 0.8)]);
        let bad = summary(r#"{"calibration": [{"nominal": 0.9}]}"#).unwrap();
        assert!(bad
            .coverage()
            .unwrap_err()
            .to_string()
            .contains("calibration"));
    }

    #[test]
    fn names_a_field_of_the_wrong_type() {
        let s = summary(r#"{"lppd": "high"}"#).unwrap();
        let err = s.number("lppd").unwrap_err().to_string();
        assert!(err.contains("field `lppd`"), "{err}");
    }

    #[test]
    fn invalid_json_reports_its_line() {
        let err = summary("{\n\"lppd\": 1,\n oops\n}")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("line 3"), "{err}");
    }
}

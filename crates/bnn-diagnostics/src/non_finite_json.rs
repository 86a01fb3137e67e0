//! Non-finite diagnostics in JSON: NaN as `null`, ±∞ as `"inf"`/`"-inf"` (an R-hat of stuck chains must stay visible).

use serde::Serializer;

/// Serializes one value (for `#[serde(serialize_with = "...")]`).
pub fn serialize_non_finite<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    match *value {
        v if v.is_finite() => serializer.serialize_f64(v),
        v if v.is_nan() => serializer.serialize_none(),
        v if v > 0.0 => serializer.serialize_str("inf"),
        _ => serializer.serialize_str("-inf"),
    }
}

/// Serializes a list of values each as [`serialize_non_finite`] does.
pub fn serialize_non_finite_slice<S: Serializer>(
    values: &[f64],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    struct One(f64);
    impl serde::Serialize for One {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serialize_non_finite(&self.0, serializer)
        }
    }
    let mut seq = serializer.serialize_seq(Some(values.len()))?;
    for &v in values {
        seq.serialize_element(&One(v))?;
    }
    seq.end()
}

/// Reads a value written by [`serialize_non_finite`]: a number, `null` (NaN), or `"inf"` /
/// `"-inf"`; `None` for anything else.
pub fn non_finite_from_json(value: &serde_json::Value) -> Option<f64> {
    match value {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::Null => Some(f64::NAN),
        serde_json::Value::String(s) if s == "inf" => Some(f64::INFINITY),
        serde_json::Value::String(s) if s == "-inf" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct Row {
        #[serde(serialize_with = "serialize_non_finite")]
        value: f64,
        #[serde(serialize_with = "serialize_non_finite_slice")]
        values: Vec<f64>,
    }

    #[test]
    fn numbers_null_and_inf_strings_round_trip() {
        let text = serde_json::to_string(&Row {
            value: f64::INFINITY,
            values: vec![1.5, f64::NAN, f64::NEG_INFINITY],
        })
        .unwrap();
        assert_eq!(text, r#"{"value":"inf","values":[1.5,null,"-inf"]}"#);
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(non_finite_from_json(&back["value"]), Some(f64::INFINITY));
        let values: Vec<Option<f64>> = back["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(non_finite_from_json)
            .collect();
        assert_eq!((values[0], values[2]), (Some(1.5), Some(f64::NEG_INFINITY)));
        assert!(values[1].unwrap().is_nan());
        assert_eq!(non_finite_from_json(&serde_json::json!("high")), None);
    }
}

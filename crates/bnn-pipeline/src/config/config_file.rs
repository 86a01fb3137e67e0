//! Reading `run.toml`/`config.toml`: keys left out keep their defaults, an unknown key names file, line and the valid keys.

use crate::config::kernel_settings::KernelSettings;
use crate::config::legacy_config::{LegacySamplerSection, LEGACY_KEYS};
use crate::config::run_config::RunConfig;
use anyhow::{anyhow, bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::Path;
use toml_edit::{ImDocument, Item};

/// The sections of a config file, in the order they are written.
pub const SECTIONS: [&str; 5] = ["data", "model", "ensemble", "sampler", "runtime"];

impl RunConfig {
    /// Reads a TOML config file (see [`RunConfig::from_toml_str`]).
    pub fn from_toml_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config {}", path.display()))?;
        Self::from_toml_str(&text, &path.display().to_string())
    }

    /// Reads a TOML config for a run of the sampler `sampler` (if given): a `[sampler]` section
    /// in the old flat shape is read as that sampler's settings, as flags over such a file
    /// always did; the current shape is read as it is.
    pub fn from_toml_file_for_sampler(path: &Path, sampler: Option<&str>) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config {}", path.display()))?;
        Self::parse_toml(&text, &path.display().to_string(), sampler)
    }

    /// Parses a TOML config; keys left out keep their defaults. `origin` names the text in
    /// errors: `config <origin>: line L: unknown key `draw` in [sampler]; valid keys: ...`.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self> {
        Self::parse_toml(text, origin, None)
    }

    fn parse_toml(text: &str, origin: &str, sampler: Option<&str>) -> Result<Self> {
        let at = |span: Option<std::ops::Range<usize>>| {
            format!("config {origin}: line {}", line_of(text, span))
        };
        let document = ImDocument::parse(text)
            .map_err(|e| anyhow!("{}: {}", at(e.span()), one_line(e.message())))?;
        let defaults = RunConfig::new();
        let mut config = RunConfig::new();
        for (name, item) in document.as_table().iter() {
            let key_span = document.as_table().key(name).and_then(|k| k.span());
            let Some(table) = item.as_table_like() else {
                bail!(
                    "{}: `{name}` must be a section such as [{name}]; the sections are [{}]",
                    at(key_span),
                    SECTIONS.join("], [")
                );
            };
            let entries: Vec<(String, toml::Value, Option<std::ops::Range<usize>>)> = table
                .iter()
                .map(|(key, value)| {
                    let span = table.key(key).and_then(|k| k.span());
                    let value = toml_value(value)
                        .map_err(|e| anyhow!("{}: `{key}` in [{name}]: {e}", at(span.clone())))?;
                    Ok((key.to_string(), value, span))
                })
                .collect::<Result<_>>()?;
            let context = SectionContext {
                section: name,
                at: &at,
            };
            match name {
                "data" => config.data = context.merge(&defaults.data, &entries)?,
                "model" => config.model = context.merge(&defaults.model, &entries)?,
                "ensemble" => config.ensemble = context.merge(&defaults.ensemble, &entries)?,
                "sampler" => {
                    let legacy = entries
                        .iter()
                        .find(|(key, ..)| LEGACY_KEYS.iter().any(|(old, _)| old == key));
                    config.sampler = match legacy {
                        None => {
                            if let Some(inner) =
                                table.get("algorithm").and_then(|i| i.as_table_like())
                            {
                                check_sampler_table(inner, &at)?;
                            }
                            context.merge(&defaults.sampler, &entries)?
                        }
                        Some((key, _, span)) => {
                            if let Some((_, toml::Value::Table(_), _)) =
                                entries.iter().find(|(k, ..)| k == "algorithm")
                            {
                                let now = LEGACY_KEYS.iter().find(|(old, _)| old == key);
                                bail!(
                                    "{}: `{key}` in [sampler] is the old flat form; with [sampler.algorithm] \
                                     it is {} there",
                                    at(span.clone()),
                                    now.map_or("a key", |(_, new)| new)
                                );
                            }
                            let mut legacy =
                                context.merge(&LegacySamplerSection::new(), &entries)?;
                            if let Some(name) = sampler {
                                legacy.algorithm = name.to_string();
                            }
                            legacy
                                .into_current()
                                .map_err(|e| anyhow!("{}: {e}", at(span.clone())))?
                        }
                    }
                }
                "runtime" => config.runtime = context.merge(&defaults.runtime, &entries)?,
                other => bail!(
                    "{}: unknown section [{other}]; valid sections: {}",
                    at(key_span),
                    SECTIONS.join(", ")
                ),
            }
        }
        Ok(config)
    }

    /// The `(section, key)` pairs a config file sets itself (what it leaves out keeps a
    /// default, which is not a choice).
    pub fn keys_in_toml_file(path: &Path) -> Result<Vec<(String, String)>> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config {}", path.display()))?;
        let table: toml::Table =
            toml::from_str(&text).with_context(|| format!("config {}", path.display()))?;
        Ok(table
            .iter()
            .filter_map(|(section, item)| item.as_table().map(|t| (section, t)))
            .flat_map(|(section, t)| t.keys().map(move |key| (section.clone(), key.clone())))
            .collect())
    }

    /// The config as TOML, every section written out.
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string_pretty(self).context("writing the config as TOML")
    }
}

/// Where errors of one section point.
struct SectionContext<'a, F: Fn(Option<std::ops::Range<usize>>) -> String> {
    section: &'a str,
    at: &'a F,
}

impl<F: Fn(Option<std::ops::Range<usize>>) -> String> SectionContext<'_, F> {
    /// `defaults` with the file's `entries` put in, one key at a time so that a value of the
    /// wrong type is reported at its own line.
    fn merge<T: Serialize + DeserializeOwned>(
        &self,
        defaults: &T,
        entries: &[(String, toml::Value, Option<std::ops::Range<usize>>)],
    ) -> Result<T> {
        // Every field of the section, those without a value (`None`) included, is a valid key.
        let valid: Vec<String> = match serde_json::to_value(defaults)? {
            serde_json::Value::Object(fields) => fields.keys().cloned().collect(),
            _ => Vec::new(),
        };
        let mut table = match toml::Value::try_from(defaults)? {
            toml::Value::Table(table) => table,
            other => bail!(
                "the defaults of [{}] are not a table: {other}",
                self.section
            ),
        };
        for (key, value, span) in entries {
            if !valid.contains(key) {
                bail!(
                    "{}: unknown key `{key}` in [{}]; valid keys: {}",
                    (self.at)(span.clone()),
                    self.section,
                    valid.join(", ")
                );
            }
            table.insert(key.clone(), value.clone());
            T::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
                anyhow!(
                    "{}: `{key}` in [{}]: {}",
                    (self.at)(span.clone()),
                    self.section,
                    one_line(e.message())
                )
            })?;
        }
        T::deserialize(toml::Value::Table(table))
            .map_err(|e| anyhow!("[{}]: {}", self.section, one_line(e.message())))
    }
}

/// Reads `[sampler.algorithm]` key by key, so that an error names the line of its own key
/// (the section's merge would name the table's header).
fn check_sampler_table(
    table: &dyn toml_edit::TableLike,
    at: &dyn Fn(Option<std::ops::Range<usize>>) -> String,
) -> Result<()> {
    let span = |key: &str| table.key(key).and_then(|k| k.span());
    let name = match table.get("name").map(toml_value).transpose()? {
        Some(toml::Value::String(name)) => name,
        // The merge says what is wrong with a missing or mistyped name.
        _ => return Ok(()),
    };
    let mut settings = KernelSettings::named(&name)
        .map_err(|e| anyhow!("{}: [sampler.algorithm] {e}", at(span("name"))))?;
    for (key, item) in table.iter().filter(|(key, _)| *key != "name") {
        let value = toml_value(item)
            .map_err(|e| anyhow!("{}: `{key}` in [sampler.algorithm]: {e}", at(span(key))))?;
        settings
            .set(key, value)
            .map_err(|e| anyhow!("{}: [sampler.algorithm] {e}", at(span(key))))?;
    }
    Ok(())
}

/// A `toml_edit` value as a `toml` value, through its TOML text.
fn toml_value(item: &Item) -> Result<toml::Value> {
    // A nested table (`[sampler.algorithm]`) is written as an inline one first.
    let value = item
        .clone()
        .into_value()
        .map_err(|_| anyhow!("not a value"))?;
    let text = format!("value = {}", value.to_string().trim());
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| anyhow!("{}", e.message()))?;
    table.remove("value").ok_or_else(|| anyhow!("not a value"))
}

/// A parser's message on one line.
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The 1-based line of a byte span's start (line 1 without a span).
fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> usize {
    span.map_or(1, |s| {
        text[..s.start.min(text.len())].matches('\n').count() + 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_left_out_keep_their_defaults_and_the_text_reads_back() {
        let config = RunConfig::from_toml_str(
            "[data]\ndataset = \"concrete\"\n[sampler]\ndraws = 300\nwarmup = 50\n",
            "run.toml",
        )
        .unwrap();
        assert_eq!(config.data.dataset, "concrete");
        assert_eq!((config.sampler.draws, config.sampler.warmup), (300, 50));
        assert_eq!(config.ensemble.members, 12);
        assert_eq!(config.sampler.chains, None);
        let again = RunConfig::from_toml_str(&config.to_toml().unwrap(), "written").unwrap();
        assert_eq!(again, config);
        assert_eq!(
            RunConfig::from_toml_str("", "empty").unwrap(),
            RunConfig::new()
        );
    }

    #[test]
    fn an_unknown_key_names_file_line_key_and_the_valid_keys() {
        let error = RunConfig::from_toml_str(
            "[data]\ndataset = \"cos2x\"\n\n[sampler]\nwarmup = 10\ndraw = 300\n",
            "run.toml",
        )
        .unwrap_err();
        let message = format!("{error:#}");
        assert!(
            message.starts_with(
                "config run.toml: line 6: unknown key `draw` in [sampler]; valid keys: "
            ),
            "{message}"
        );
        for key in [
            "algorithm",
            "draws",
            "init_from",
            "chains",
            "early_stop_tolerance",
        ] {
            assert!(
                message.contains(&format!("{key},")) || message.ends_with(key),
                "{key} missing: {message}"
            );
        }
    }

    #[test]
    fn an_error_in_the_samplers_table_names_its_own_line() {
        for (text, expected) in [
            (
                "[sampler]\nwarmup = 10\n\n[sampler.algorithm]\nname = \"nuts\"\n\nmax_tree_depth = \"x\"\n",
                "config f: line 7: [sampler.algorithm] `max_tree_depth`: invalid type",
            ),
            (
                "[sampler.algorithm]\nname = \"nuts\"\npersistence = 0.5\n",
                "config f: line 3: [sampler.algorithm] nuts has no setting `persistence` (msd has it)",
            ),
            (
                "[sampler.algorithm]\n\nname = \"gibbs\"\n",
                "config f: line 3: [sampler.algorithm] unknown sampler `gibbs`",
            ),
        ] {
            let message = format!("{:#}", RunConfig::from_toml_str(text, "f").unwrap_err());
            assert!(message.starts_with(expected), "{text:?}: {message}");
        }
    }

    #[test]
    fn unknown_sections_wrong_types_and_syntax_errors_name_their_line() {
        let cases = [
            ("[sampler]\ndraws = 3\n[smapler]\nseed = 1\n", "config f: line 3: unknown section [smapler]; valid sections: data, model, ensemble, sampler, runtime"),
            ("draws = 3\n", "config f: line 1: `draws` must be a section"),
            ("[sampler]\nseed = 1\ndraws = \"many\"\n", "config f: line 3: `draws` in [sampler]: invalid type: string \"many\""),
            ("[sampler]\nalgorithm = \"gibbs\"\n", "config f: line 2: `algorithm` in [sampler]: unknown sampler `gibbs`; the samplers are nuts, hmc"),
            ("[model]\nhidden = [16,\n", "config f: line 3: invalid array; expected `]`"),
        ];
        for (text, expected) in cases {
            let message = format!("{:#}", RunConfig::from_toml_str(text, "f").unwrap_err());
            assert!(message.starts_with(expected), "{text:?}: {message}");
        }
    }
}

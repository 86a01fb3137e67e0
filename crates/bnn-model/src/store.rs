//! Saving and loading flat parameter vectors as safetensors files with Burn's recorder
//! (burn-store), so that PyTorch, JAX and NumPy users can read them.
//!
//! A file holds one float32 tensor per module parameter, named by its path in [`BnnModel`]:
//! `network.layers.{l}.weight` (`[d_in, d_out]`, Burn's and Flax's orientation; PyTorch's
//! `nn.Linear` stores the transpose), `network.layers.{l}.bias` (`[d_out]`) and, for the
//! learned-σ head, `log_sigma` (`[T]`, one per target). The model config is kept as JSON in the header's
//! metadata under `bnn_config`. In Python: `safetensors.numpy.load_file(path)`.

use crate::flatten::{flatten, unflatten, LengthMismatch};
use crate::model::{BnnConfig, BnnConfigError, BnnModel};
use burn::config::config_to_json;
use burn::store::{ModuleSnapshot, ModuleStore, SafetensorsStore, SafetensorsStoreError};
use burn::tensor::{DType, Device};
use std::path::{Path, PathBuf};

/// Why parameters could not be saved or loaded. The messages are meant for users; each names
/// its cause, which is also `source()` where it is an error of its own.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("invalid model config: {0}")]
    Config(#[source] BnnConfigError),
    #[error("cannot save parameters: {0}")]
    Length(LengthMismatch),
    #[error("cannot write parameters to {}: {cause}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot read parameters from {}: {cause}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        cause: std::io::Error,
    },
    #[error("{} is not a readable safetensors file: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("{} has no tensor '{tensor}', which this model needs (the file holds {found}); was it saved for another architecture?", path.display())]
    MissingTensor {
        path: PathBuf,
        tensor: String,
        found: String,
    },
    #[error("{} holds tensor '{tensor}', which this model does not have; was it saved for another architecture?", path.display())]
    UnexpectedTensor { path: PathBuf, tensor: String },
    #[error("tensor '{tensor}' in {} has shape {found:?}, but this model needs {expected:?}; was it saved for another architecture?", path.display())]
    Shape {
        path: PathBuf,
        tensor: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    #[error("tensor '{tensor}' in {} is {found}, but parameters are stored as F32", path.display())]
    DType {
        path: PathBuf,
        tensor: String,
        found: String,
    },
}

impl From<LengthMismatch> for StoreError {
    fn from(error: LengthMismatch) -> Self {
        Self::Length(error)
    }
}

/// The device models are built on for saving and loading (host memory).
fn host_device() -> Device {
    Device::flex()
}

/// Writes `parameters` (flat, in `config`'s layout) to `path` as a safetensors file,
/// replacing any file there.
///
/// The file is written whole or not at all (a temporary file renamed into place), and its
/// header's keys are sorted, so the same parameters always give the same bytes (Burn's store
/// writes its metadata in hash-map order, which changes from run to run).
pub fn save_parameters(
    config: &BnnConfig,
    parameters: &[f32],
    path: &Path,
) -> Result<(), StoreError> {
    config.validate().map_err(StoreError::Config)?;
    let module: BnnModel = unflatten(config.init(&host_device()), parameters)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Unique per process: two processes saving the same member never share a temporary file.
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let write_error = |cause: Box<dyn std::error::Error + Send + Sync>| StoreError::Write {
        path: path.to_path_buf(),
        cause,
    };
    let written = (|| {
        let mut store = SafetensorsStore::from_file(&tmp)
            .overwrite(true)
            .metadata("bnn_config", config_to_json(config));
        module
            .save_into(&mut store)
            .map_err(|e| write_error(e.into()))?;
        let bytes = std::fs::read(&tmp).map_err(|e| write_error(e.into()))?;
        std::fs::write(
            &tmp,
            sorted_header(&bytes).map_err(|e| write_error(e.into()))?,
        )
        .map_err(|e| write_error(e.into()))?;
        std::fs::rename(&tmp, path).map_err(|e| write_error(e.into()))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Why a written file's header could not be rewritten with sorted keys.
#[derive(Debug, thiserror::Error)]
enum HeaderError {
    #[error("the written file has no valid safetensors header")]
    Missing,
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// A safetensors file's bytes with its JSON header's object keys sorted at every level (the
/// tensors' offsets are relative to the data, so the data is untouched); the header is padded
/// with spaces to a multiple of 8 bytes, as the format recommends.
fn sorted_header(bytes: &[u8]) -> Result<Vec<u8>, HeaderError> {
    let length = u64::from_le_bytes(
        bytes
            .get(..8)
            .ok_or(HeaderError::Missing)?
            .try_into()
            .map_err(|_| HeaderError::Missing)?,
    ) as usize;
    let header = bytes.get(8..8 + length).ok_or(HeaderError::Missing)?;
    let value: serde_json::Value = serde_json::from_slice(header)?;
    let mut text = String::new();
    write_sorted(&value, &mut text);
    while !text.len().is_multiple_of(8) {
        text.push(' ');
    }
    let mut out = Vec::with_capacity(8 + text.len() + bytes.len() - 8 - length);
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&bytes[8 + length..]);
    Ok(out)
}

/// Compact JSON with every object's keys in sorted order.
fn write_sorted(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(key.clone()).to_string());
                out.push(':');
                write_sorted(&map[key], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Reads the flat parameters of a `config` model from a file written by [`save_parameters`]
/// (or any safetensors file with the same tensor names, shapes and dtype).
///
/// Every tensor is checked against the model before anything is loaded, so a file for another
/// architecture is refused with the first tensor that does not fit.
pub fn load_parameters(config: &BnnConfig, path: &Path) -> Result<Vec<f32>, StoreError> {
    config.validate().map_err(StoreError::Config)?;
    let mut module: BnnModel = config.init(&host_device());
    let expected: Vec<(String, Vec<usize>)> = module
        .collect(None, None, false)
        .into_iter()
        .map(|t| (t.name, t.shape.to_vec()))
        .collect();
    let mut store = SafetensorsStore::from_file(path);
    let corrupt = |reason: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let found = store.get_all_tensors().map_err(|e| match e {
        SafetensorsStoreError::Io(cause) => StoreError::Read {
            path: path.to_path_buf(),
            cause,
        },
        other => corrupt(other.to_string()),
    })?;
    // Names first (a layer more or less is best told as such), then shapes and dtypes.
    if let Some((name, _)) = expected.iter().find(|(name, _)| !found.contains_key(name)) {
        let names: Vec<&str> = found.keys().map(String::as_str).collect();
        let found = if names.is_empty() {
            "no tensors".to_string()
        } else {
            names.join(", ")
        };
        return Err(StoreError::MissingTensor {
            path: path.to_path_buf(),
            tensor: name.clone(),
            found,
        });
    }
    if let Some(extra) = found
        .keys()
        .find(|name| !expected.iter().any(|(e, _)| e == *name))
    {
        return Err(StoreError::UnexpectedTensor {
            path: path.to_path_buf(),
            tensor: extra.clone(),
        });
    }
    for (name, shape) in &expected {
        let tensor = &found[name];
        if tensor.shape.to_vec() != *shape {
            return Err(StoreError::Shape {
                path: path.to_path_buf(),
                tensor: name.clone(),
                expected: shape.clone(),
                found: tensor.shape.to_vec(),
            });
        }
        if tensor.dtype != DType::F32 {
            return Err(StoreError::DType {
                path: path.to_path_buf(),
                tensor: name.clone(),
                found: format!("{:?}", tensor.dtype),
            });
        }
    }
    // Names, shapes and dtypes agree, so what can still fail is reading the bytes.
    let result = module
        .load_from(&mut store)
        .map_err(|e| corrupt(e.to_string()))?;
    if let Some(error) = result.errors.first() {
        return Err(corrupt(error.to_string()));
    }
    Ok(flatten(&module))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_parameters_give_the_same_bytes_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let config = BnnConfig::new(3).with_hidden(vec![4]);
        let parameters: Vec<f32> = (0..crate::layout_of(&config.init(&host_device())).dim())
            .map(|i| i as f32 * 0.25 - 1.0)
            .collect();
        let files: Vec<PathBuf> = (0..4)
            .map(|i| dir.path().join(format!("member_{i}.safetensors")))
            .collect();
        for file in &files {
            save_parameters(&config, &parameters, file).unwrap();
        }
        let first = std::fs::read(&files[0]).unwrap();
        for file in &files[1..] {
            assert_eq!(std::fs::read(file).unwrap(), first, "{}", file.display());
        }
        assert_eq!(load_parameters(&config, &files[0]).unwrap(), parameters);
        // Only the files themselves: no temporary file is left beside them.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), files.len());
    }
}

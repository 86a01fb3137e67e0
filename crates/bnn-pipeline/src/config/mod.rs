//! The run's configuration: `run.toml`'s sections as Burn configs, the nested sampler
//! settings, how a config file is read (old shapes included), the model's text settings and
//! how big a run is, and the defaults a measured study chose.

pub(crate) mod config_file;
pub(crate) mod kernel_settings;
pub(crate) mod legacy_config;
pub(crate) mod model_spec;
pub(crate) mod run_config;
pub(crate) mod run_defaults;
pub(crate) mod run_size;

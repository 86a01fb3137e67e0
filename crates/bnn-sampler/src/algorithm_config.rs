//! The macro behind the list of samplers `Sampler` runs by name (the list itself sits in
//! `kernels/mod.rs`, beside the kernels' modules). Each entry is a settings type implementing
//! `SamplerSettings`; what the runner, the draw files and the command line ask of a sampler goes
//! through that trait, so adding a sampler is its file in `kernels/` and one line in the list.

/// Declares `AlgorithmConfig` (one variant per listed sampler, serialized as before), its
/// `From` conversions, and its `SamplerSettings` impl, which hands every call to the variant.
macro_rules! registered_samplers {
    ($($(#[$doc:meta])* $variant:ident($settings:ty),)+) => {
        /// Which transition kernel the chains use: one of the registered samplers.
        #[derive(::bnn_config_derive::Config, Debug)]
        pub enum AlgorithmConfig {
            $($(#[$doc])* $variant($settings),)+
        }

        $(impl From<$settings> for AlgorithmConfig {
            fn from(settings: $settings) -> Self {
                AlgorithmConfig::$variant(settings)
            }
        })+

        impl AlgorithmConfig {
            /// The registered samplers' names, in list order.
            pub const NAMES: &'static [&'static str] =
                &[$(<$settings as $crate::SamplerSettings>::NAME,)+];

            /// Each registered sampler's name beside the tag its settings carry when this enum
            /// is serialized (the variant's name: `nuts` beside `Nuts`), for formats that name
            /// the sampler by its name instead.
            pub const TAGS: &'static [(&'static str, &'static str)] =
                &[$((<$settings as $crate::SamplerSettings>::NAME, stringify!($variant)),)+];

            /// The registered sampler called `name`, with its own default settings.
            pub fn named(name: &str) -> Option<Self> {
                $(if name == <$settings as $crate::SamplerSettings>::NAME {
                    return Some(<$settings>::new().into());
                })+
                None
            }

            /// This sampler's name (`nuts`, `mclmc`, ...).
            pub fn name(&self) -> &'static str {
                match self {
                    $(AlgorithmConfig::$variant(_) => <$settings as $crate::SamplerSettings>::NAME,)+
                }
            }
        }

        /// Every call goes to the listed sampler's own settings.
        impl $crate::SamplerSettings for AlgorithmConfig {
            const NAME: &'static str = "any registered sampler";

            fn validate(&self) -> Result<(), $crate::SamplerError> {
                match self { $(AlgorithmConfig::$variant(s) => s.validate(),)+ }
            }

            fn target_accept(&self) -> f64 {
                match self { $(AlgorithmConfig::$variant(s) => s.target_accept(),)+ }
            }

            fn uses_leapfrog(&self) -> bool {
                match self { $(AlgorithmConfig::$variant(s) => s.uses_leapfrog(),)+ }
            }

            fn default_step_size(&self, dim: usize) -> f64 {
                match self { $(AlgorithmConfig::$variant(s) => s.default_step_size(dim),)+ }
            }

            fn default_budget(&self) -> $crate::Budget {
                match self { $(AlgorithmConfig::$variant(s) => s.default_budget(),)+ }
            }

            fn min_dim(&self) -> usize {
                match self { $(AlgorithmConfig::$variant(s) => s.min_dim(),)+ }
            }

            fn supports_batched(&self) -> bool {
                match self { $(AlgorithmConfig::$variant(s) => s.supports_batched(),)+ }
            }

            fn tunes_across_chains(&self) -> bool {
                match self { $(AlgorithmConfig::$variant(s) => s.tunes_across_chains(),)+ }
            }

            fn supports_stationary_warmup(&self) -> bool {
                match self { $(AlgorithmConfig::$variant(s) => s.supports_stationary_warmup(),)+ }
            }

            fn start_warmup(
                &self,
                warmup: &$crate::WarmupConfig,
                num_warmup: usize,
                dim: usize,
                params: &mut $crate::TunedParams,
            ) -> $crate::Tuner {
                match self {
                    $(AlgorithmConfig::$variant(s) => {
                        s.start_warmup(warmup, num_warmup, dim, params)
                    })+
                }
            }

            fn stat_columns(&self) -> &'static [$crate::StatColumn] {
                match self { $(AlgorithmConfig::$variant(s) => s.stat_columns(),)+ }
            }

            fn run<L: $crate::LogDensity + ?Sized>(
                &self,
                chains: $crate::ChainRunner<'_, L>,
            ) -> Result<(), $crate::SamplerError> {
                match self { $(AlgorithmConfig::$variant(s) => s.run(chains),)+ }
            }
        }
    };
}

pub(crate) use registered_samplers;

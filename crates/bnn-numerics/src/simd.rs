//! Runs a kernel compiled for the widest SIMD instruction set this CPU has.
//!
//! The kernels are written as plain loops over slices; `dispatch!` instantiates an
//! `#[inline(always)]` function inside `#[target_feature]` wrappers (AVX-512, AVX2+FMA) so that
//! the compiler vectorizes the loops with those instructions, and picks one at run time
//! (feature detection is cached by the standard library). Every level computes the same
//! IEEE operations in the same order, and the fused multiply-adds are explicit (`mul_add`, one
//! rounding on every level), so our loops give the same bits at every level (the narrow-layer pass, whose products are our
//! own multiply-adds, gives the same bits on every x86-64 CPU, with or without FMA). The matrix
//! products of nets wider than 64 units go to the `gemm` crate, which picks its own FMA
//! microkernels wherever the CPU has FMA (AVX-512 machines included; `BNN_KERNEL_ISA` does not
//! reach it): results are bit-identical per machine, whatever the level or thread count, and may
//! differ in the last bits between a CPU with FMA and one without.
//!
//! Every function a kernel calls must be `#[inline(always)]` (or a plain loop): one left out of
//! line is compiled for the baseline target, where each `mul_add` becomes a call to libm's
//! `fmaf` (measured: a likelihood head left out of line cost a quarter of a 6-16-16-2 gradient;
//! an iterator's `for_each` left out of line made a tanh layer 20× slower).

/// `dispatch!(function(args...))`: calls `function` compiled for the best available level.
/// Exported for other crates' hot loops (the microcanonical samplers' velocity updates).
#[macro_export]
macro_rules! dispatch {
    ($function:ident $(::<$($generic:ty),*>)? ($($arg:expr),* $(,)?)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,bmi1,bmi2,lzcnt,popcnt")]
            unsafe fn avx512<F: FnOnce() -> T, T>(f: F) -> T {
                f()
            }
            #[target_feature(enable = "avx2,fma,bmi1,bmi2,lzcnt,popcnt")]
            unsafe fn avx2<F: FnOnce() -> T, T>(f: F) -> T {
                f()
            }
            match $crate::simd::level() {
                // SAFETY: `level()` returns a level only when the CPU supports its features.
                $crate::simd::Level::Avx512 => unsafe { avx512(#[inline(always)] || $function $(::<$($generic),*>)? ($($arg),*)) },
                // SAFETY: as above.
                $crate::simd::Level::Avx2Fma => unsafe { avx2(#[inline(always)] || $function $(::<$($generic),*>)? ($($arg),*)) },
                $crate::simd::Level::Portable => $function $(::<$($generic),*>)? ($($arg),*),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            $function $(::<$($generic),*>)? ($($arg),*)
        }
    }};
}
pub use crate::dispatch;

use std::sync::OnceLock;

/// The instruction sets the kernels are compiled for, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Portable,
    Avx2Fma,
    Avx512,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Portable => "portable",
            Level::Avx2Fma => "avx2_fma",
            Level::Avx512 => "avx512",
        }
    }
}

/// Environment variable that lowers the kernels' instruction set (`avx2`, `portable`): to
/// measure the AVX2 path on an AVX-512 machine.
pub const ISA_VARIABLE: &str = "BNN_KERNEL_ISA";

/// The widest level this CPU supports.
pub fn detected_level() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512bw")
        {
            return Level::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Level::Avx2Fma;
        }
    }
    Level::Portable
}

/// Why the level `BNN_KERNEL_ISA` asks for cannot be had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IsaRequestError {
    /// The value names no level.
    Unknown(String),
    /// The CPU lacks the level asked for.
    Unsupported { wanted: Level, detected: Level },
}

impl std::fmt::Display for IsaRequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IsaRequestError::Unknown(value) => write!(
                f,
                "{ISA_VARIABLE}={value}: expected auto, avx512, avx2 or portable"
            ),
            IsaRequestError::Unsupported { wanted, detected } => write!(
                f,
                "{ISA_VARIABLE}={}: this CPU supports at most {}",
                wanted.name(),
                detected.name()
            ),
        }
    }
}

impl std::error::Error for IsaRequestError {}

/// The level `BNN_KERNEL_ISA` asks for on top of the detected one, or why it cannot be had.
pub fn requested_level() -> Result<Level, IsaRequestError> {
    let detected = detected_level();
    let Ok(value) = std::env::var(ISA_VARIABLE) else {
        return Ok(detected);
    };
    let wanted = match value.trim().to_ascii_lowercase().as_str() {
        "" | "auto" => return Ok(detected),
        "avx512" => Level::Avx512,
        "avx2" | "avx2_fma" => Level::Avx2Fma,
        "portable" | "scalar" => Level::Portable,
        other => return Err(IsaRequestError::Unknown(other.to_string())),
    };
    if wanted > detected {
        return Err(IsaRequestError::Unsupported { wanted, detected });
    }
    Ok(wanted)
}

/// The level every kernel runs at in this process (read once). An unusable `BNN_KERNEL_ISA`
/// falls back to the detected level here; programs check [`requested_level`] first and stop
/// with its message.
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| requested_level().unwrap_or_else(|_| detected_level()))
}

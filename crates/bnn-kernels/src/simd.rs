//! Runs a kernel compiled for the widest SIMD instruction set this CPU has.
//!
//! The kernels are written as plain loops over slices; `dispatch!` instantiates an
//! `#[inline(always)]` function inside `#[target_feature]` wrappers (AVX-512, AVX2+FMA) so that
//! the compiler vectorizes the loops with those instructions, and picks one at run time
//! (feature detection is cached by the standard library). Every level computes the same
//! IEEE operations in the same order (no fused multiply-add is introduced), so the results do
//! not depend on the machine's SIMD level.

/// `dispatch!(function(args...))`: calls `function` compiled for the best available level.
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
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx512dq")
                && std::arch::is_x86_feature_detected!("avx512bw")
            {
                // SAFETY: the CPU supports every feature the wrapper enables.
                unsafe { avx512(#[inline(always)] || $function $(::<$($generic),*>)? ($($arg),*)) }
            } else if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                // SAFETY: as above.
                unsafe { avx2(#[inline(always)] || $function $(::<$($generic),*>)? ($($arg),*)) }
            } else {
                $function $(::<$($generic),*>)? ($($arg),*)
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            $function $(::<$($generic),*>)? ($($arg),*)
        }
    }};
}
pub(crate) use dispatch;

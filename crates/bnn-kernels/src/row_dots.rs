//! One dot product per row of a row-major matrix with one column vector, each summed in 16
//! lanes and folded in halves: the output layer of the one-hidden-layer pass.
//!
//! Why intrinsics here: written as plain loops over `[f32; 16]` lane arrays, LLVM's
//! SLP vectorizer split the 16 lane sums into one 8-wide and four 2-wide pieces and folded them
//! with scalar shuffles (perf on the 1-50-1 nets: 18–20% of a gradient, 0.5 µs). The same
//! operations written with AVX-512 and AVX2 intrinsics take 0.15 µs for 80 rows. Both follow
//! [`fold_lanes`]'s order exactly (lane l gathers columns l, l + 16, …; then l + (l + 8),
//! l + (l + 4), l + (l + 2), 0 + 1), so every level gives the portable loop's bits (tested).

use crate::base::fold_lanes;
use crate::real::Real;
#[cfg(target_arch = "x86_64")]
use std::any::TypeId;

const LANES: usize = 16;
const HALF: usize = LANES / 2;

/// `outputs[row · stride] = bias + Σ_u rows[row, u] · column[u]` for every row of `rows`
/// (`[n, width]`), where `width` is whole chunks of 16 plus at most one chunk of 8 and `column`
/// holds at least `width` entries.
#[inline(always)]
pub(crate) fn row_dots<R: Real>(
    rows: &[R],
    column: &[R],
    width: usize,
    outputs: &mut [R],
    stride: usize,
    bias: R,
) {
    if width == 0 {
        return;
    }
    let whole = width / LANES * LANES;
    assert!(
        width - whole == 0 || width - whole == HALF,
        "row width {width}: whole chunks of 16 and at most one of 8"
    );
    assert!(column.len() >= width && rows.len().is_multiple_of(width));
    let n = rows.len() / width;
    // The last row's output index must exist (the intrinsic paths write without bounds checks).
    assert!(
        n == 0
            || (n - 1)
                .checked_mul(stride)
                .is_some_and(|last| last < outputs.len())
    );
    #[cfg(target_arch = "x86_64")]
    {
        if TypeId::of::<R>() == TypeId::of::<f32>() {
            // SAFETY: R is f32 (checked just above), so the slices can be read and written as f32.
            let (rows_f32, column_f32, outputs_f32, bias_f32) = unsafe {
                (
                    std::slice::from_raw_parts(rows.as_ptr().cast::<f32>(), rows.len()),
                    std::slice::from_raw_parts(column.as_ptr().cast::<f32>(), column.len()),
                    std::slice::from_raw_parts_mut(
                        outputs.as_mut_ptr().cast::<f32>(),
                        outputs.len(),
                    ),
                    *(&bias as *const R).cast::<f32>(),
                )
            };
            match crate::simd::level() {
                // SAFETY: the level is one this CPU supports; the shape checks above keep every load
                // inside its row and column.
                crate::simd::Level::Avx512 => {
                    return unsafe {
                        x86::avx512(rows_f32, column_f32, width, outputs_f32, stride, bias_f32)
                    }
                }
                // SAFETY: as above.
                crate::simd::Level::Avx2Fma => {
                    return unsafe {
                        x86::avx2(rows_f32, column_f32, width, outputs_f32, stride, bias_f32)
                    }
                }
                crate::simd::Level::Portable => {}
            }
        }
    }
    portable(rows, column, width, outputs, stride, bias);
}

/// The reference order, for every level without intrinsics below (and f64).
#[inline(always)]
fn portable<R: Real>(
    rows: &[R],
    column: &[R],
    width: usize,
    outputs: &mut [R],
    stride: usize,
    bias: R,
) {
    let whole = width / LANES * LANES;
    for (row, post) in rows.chunks_exact(width).enumerate() {
        let mut sums = [R::ZERO; LANES];
        for start in (0..whole).step_by(LANES) {
            let (h, c): (&[R; LANES], &[R; LANES]) = (
                post[start..start + LANES].try_into().unwrap(),
                column[start..start + LANES].try_into().unwrap(),
            );
            for l in 0..LANES {
                sums[l] = h[l].mul_add(c[l], sums[l]);
            }
        }
        if whole < width {
            let (h, c): (&[R; HALF], &[R; HALF]) = (
                post[whole..whole + HALF].try_into().unwrap(),
                column[whole..whole + HALF].try_into().unwrap(),
            );
            for l in 0..HALF {
                sums[l] = h[l].mul_add(c[l], sums[l]);
            }
        }
        outputs[row * stride] = fold_lanes(&sums) + bias;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{HALF, LANES};
    use std::arch::x86_64::*;

    /// 8 lane sums → 1, as the last three steps of `fold_lanes`.
    #[inline(always)]
    unsafe fn fold_eight(eight: __m256) -> f32 {
        let four = _mm_add_ps(
            _mm256_castps256_ps128(eight),
            _mm256_extractf128_ps::<1>(eight),
        );
        let two = _mm_add_ps(four, _mm_movehl_ps(four, four));
        _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)))
    }

    /// acc + h[at..at + 8] · c[at..at + 8], one multiply-add per lane.
    #[inline(always)]
    unsafe fn fma8(h: *const f32, c: *const f32, at: usize, acc: __m256) -> __m256 {
        _mm256_fmadd_ps(_mm256_loadu_ps(h.add(at)), _mm256_loadu_ps(c.add(at)), acc)
    }

    /// One 16-lane register per row.
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx2,fma")]
    pub(super) unsafe fn avx512(
        rows: &[f32],
        column: &[f32],
        width: usize,
        outputs: &mut [f32],
        stride: usize,
        bias: f32,
    ) {
        let whole = width / LANES * LANES;
        let c = column.as_ptr();
        for (row, post) in rows.chunks_exact(width).enumerate() {
            let h = post.as_ptr();
            let mut sums = _mm512_setzero_ps();
            for start in (0..whole).step_by(LANES) {
                sums = _mm512_fmadd_ps(
                    _mm512_loadu_ps(h.add(start)),
                    _mm512_loadu_ps(c.add(start)),
                    sums,
                );
            }
            let mut low = _mm512_castps512_ps256(sums);
            if whole < width {
                low = fma8(h, c, whole, low);
            }
            *outputs.get_unchecked_mut(row * stride) =
                fold_eight(_mm256_add_ps(low, _mm512_extractf32x8_ps::<1>(sums))) + bias;
        }
    }

    /// Two 8-lane registers per row (lanes 0–7 and 8–15).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2(
        rows: &[f32],
        column: &[f32],
        width: usize,
        outputs: &mut [f32],
        stride: usize,
        bias: f32,
    ) {
        let whole = width / LANES * LANES;
        let c = column.as_ptr();
        for (row, post) in rows.chunks_exact(width).enumerate() {
            let h = post.as_ptr();
            let (mut low, mut high) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            for start in (0..whole).step_by(LANES) {
                low = fma8(h, c, start, low);
                high = fma8(h, c, start + HALF, high);
            }
            if whole < width {
                low = fma8(h, c, whole, low);
            }
            *outputs.get_unchecked_mut(row * stride) = fold_eight(_mm256_add_ps(low, high)) + bias;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every level this CPU has gives the portable loop's bits, for widths with and without a
    /// half chunk, and with a stride (two outputs per row).
    #[test]
    fn every_level_gives_the_portable_bits() {
        for width in [8usize, 16, 24, 56, 64, 72] {
            let n = 37;
            let rows: Vec<f32> = (0..n * width)
                .map(|i| ((i as f32 * 0.618_034).fract() - 0.5) * 3.0)
                .collect();
            let column: Vec<f32> = (0..width)
                .map(|i| ((i as f32 * 0.414_214).fract() - 0.5) * 2.0)
                .collect();
            let mut expected = vec![0.0f32; 2 * n];
            portable(&rows, &column, width, &mut expected[1..], 2, 0.25);
            let mut got = vec![0.0f32; 2 * n];
            row_dots(&rows, &column, width, &mut got[1..], 2, 0.25);
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                expected.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "width {width} at level {:?}",
                crate::simd::level()
            );
            #[cfg(target_arch = "x86_64")]
            {
                let detected = crate::simd::detected_level();
                if width == 8 {
                    eprintln!(
                        "row_dots: intrinsic paths checked on this CPU: {:?} and below",
                        detected
                    );
                }
                if detected >= crate::simd::Level::Avx2Fma {
                    let mut avx2 = vec![0.0f32; 2 * n];
                    // SAFETY: the CPU has AVX2 and FMA.
                    unsafe { x86::avx2(&rows, &column, width, &mut avx2[1..], 2, 0.25) };
                    assert_eq!(
                        avx2.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        expected.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "AVX2, width {width}"
                    );
                }
                if detected >= crate::simd::Level::Avx512 {
                    let mut avx512 = vec![0.0f32; 2 * n];
                    // SAFETY: the CPU has AVX-512.
                    unsafe { x86::avx512(&rows, &column, width, &mut avx512[1..], 2, 0.25) };
                    assert_eq!(
                        avx512.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        expected.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "AVX-512, width {width}"
                    );
                }
            }
            // And the value: the f64 dot product to f32 rounding.
            for row in 0..n {
                let exact: f64 = 0.25
                    + (0..width)
                        .map(|u| rows[row * width + u] as f64 * column[u] as f64)
                        .sum::<f64>();
                assert!((got[1 + 2 * row] as f64 - exact).abs() < 1e-5 * (1.0 + exact.abs()));
            }
        }
    }
}

//! Primitives the kernels' passes share: the training data view, strided matrix products and
//! the 16-lane dot product with its fixed pairwise fold (the same sums on every SIMD level).

use crate::real::Real;
use gemm::Parallelism;

/// Training data as the kernel reads them: `x` `[rows, d_input]`, `y` `[rows, target_columns]`,
/// both row major.
#[derive(Debug, Clone, Copy)]
pub struct KernelData<'a, R> {
    pub x: &'a [R],
    pub y: &'a [R],
    pub rows: usize,
}

/// How a `[rows, cols]` operand sits in memory: `row_stride` between rows, `col_stride` between
/// columns (a transposed view swaps them).
#[derive(Clone, Copy)]
pub(crate) struct Layout {
    pub(crate) row_stride: isize,
    pub(crate) col_stride: isize,
}

impl Layout {
    /// Row-major storage with `cols` columns.
    pub(crate) fn row(cols: usize) -> Self {
        Layout {
            row_stride: cols as isize,
            col_stride: 1,
        }
    }
    /// The transpose of a row-major matrix that has `stored_cols` columns.
    pub(crate) fn transposed(stored_cols: usize) -> Self {
        Layout {
            row_stride: 1,
            col_stride: stored_cols as isize,
        }
    }
}

/// `dst [m, n] (row major) (+)= lhs [m, k] · rhs [k, n]`, single threaded.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn matmul_accumulate<R: Real>(
    dst: &mut [R],
    lhs: &[R],
    rhs: &[R],
    m: usize,
    n: usize,
    k: usize,
    lhs_layout: Layout,
    rhs_layout: Layout,
    accumulate: bool,
) {
    assert!(dst.len() >= m * n && lhs.len() >= m * k && rhs.len() >= k * n);
    if m.min(n).min(k) == 1 {
        // Outer products and matrix-vector products (the 1-input and 1-output layers of small
        // regression nets): direct loops beat gemm's fixed cost (~0.5 µs per call) here.
        return small_matmul(dst, lhs, rhs, m, n, k, lhs_layout, rhs_layout, accumulate);
    }
    // SAFETY: the assertion bounds every index the strides reach: the largest is
    // (m−1)·rs + (k−1)·cs of the lhs, which is < m·k for both layouts (likewise rhs and dst).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            lhs.as_ptr(),
            lhs_layout.col_stride,
            lhs_layout.row_stride,
            rhs.as_ptr(),
            rhs_layout.col_stride,
            rhs_layout.row_stride,
            R::ONE,
            R::ONE,
            false,
            false,
            false,
            Parallelism::None,
        );
    }
}

/// [`matmul_accumulate`] for shapes with a unit dimension, as loops the compiler vectorizes:
/// a dot product per row when `n == 1`, else row updates `dst[i, :] += lhs[i, p] · rhs[p, :]`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn small_matmul<R: Real>(
    dst: &mut [R],
    lhs: &[R],
    rhs: &[R],
    m: usize,
    n: usize,
    k: usize,
    lhs_layout: Layout,
    rhs_layout: Layout,
    accumulate: bool,
) {
    let dst = &mut dst[..m * n];
    let at = |layout: Layout, row: usize, col: usize| {
        row * layout.row_stride as usize + col * layout.col_stride as usize
    };
    if n == 1 && lhs_layout.col_stride == 1 && rhs_layout.row_stride == 1 {
        // Rows of lhs are contiguous: one dot product per output.
        for (i, out) in dst.iter_mut().enumerate() {
            let d = dot(&lhs[at(lhs_layout, i, 0)..][..k], &rhs[..k]);
            *out = if accumulate { *out + d } else { d };
        }
        return;
    }
    if !accumulate {
        // The first term below is added to this zero; with k == 1 (outer products) it is the
        // only term, so write it directly instead.
        if k == 1 {
            for (i, row) in dst.chunks_exact_mut(n).enumerate() {
                let a = lhs[at(lhs_layout, i, 0)];
                if rhs_layout.col_stride == 1 {
                    for (o, &r) in row.iter_mut().zip(&rhs[..n]) {
                        *o = a * r;
                    }
                } else {
                    for (j, o) in row.iter_mut().enumerate() {
                        *o = a * rhs[at(rhs_layout, 0, j)];
                    }
                }
            }
            return;
        }
        dst.fill(R::ZERO);
    }
    if n == 1 {
        if lhs_layout.row_stride == 1 {
            // Columns of lhs are contiguous (a transposed view): dst += rhs[p] · lhs[:, p].
            for p in 0..k {
                let a = rhs[at(rhs_layout, p, 0)];
                for (o, &l) in dst.iter_mut().zip(&lhs[at(lhs_layout, 0, p)..][..m]) {
                    *o += a * l;
                }
            }
        } else {
            for (i, out) in dst.iter_mut().enumerate() {
                for p in 0..k {
                    *out += lhs[at(lhs_layout, i, p)] * rhs[at(rhs_layout, p, 0)];
                }
            }
        }
        return;
    }
    for (i, row) in dst.chunks_exact_mut(n).enumerate() {
        for p in 0..k {
            let a = lhs[at(lhs_layout, i, p)];
            if rhs_layout.col_stride == 1 {
                for (o, &r) in row.iter_mut().zip(&rhs[at(rhs_layout, p, 0)..][..n]) {
                    *o += a * r;
                }
            } else {
                for (j, o) in row.iter_mut().enumerate() {
                    *o += a * rhs[at(rhs_layout, p, j)];
                }
            }
        }
    }
}

/// Σ a_i b_i with 16 independent partial sums, so that the loop vectorizes without reassociating
/// a single running sum (which the compiler may not do for floats).
#[inline(always)]
pub(crate) fn dot<R: Real>(a: &[R], b: &[R]) -> R {
    const LANES: usize = 16; // the halving below assumes 16
    let mut partial = [R::ZERO; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (x, y) in a_chunks.zip(b_chunks) {
        for l in 0..LANES {
            partial[l] += x[l] * y[l];
        }
    }
    let mut sum = R::ZERO;
    for (x, y) in a_rest.iter().zip(b_rest) {
        sum += *x * *y;
    }
    fold_lanes(&partial) + sum
}

/// 16 partial sums into one, pairwise (8 + 8, 4 + 4, 2 + 2, 1 + 1): four dependent additions
/// instead of a running sum's sixteen, which made the fold the slowest part of a 50-wide dot
/// product (profiled on the 1-50-1 nets, one per data row); the same order on every SIMD level.
#[inline(always)]
pub(crate) fn fold_lanes<R: Real>(partial: &[R; 16]) -> R {
    let eight: [R; 8] = std::array::from_fn(|l| partial[l] + partial[l + 8]);
    let four: [R; 4] = std::array::from_fn(|l| eight[l] + eight[l + 4]);
    let two: [R; 2] = std::array::from_fn(|l| four[l] + four[l + 2]);
    two[0] + two[1]
}

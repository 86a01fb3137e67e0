//! The whole MLP log density and its gradient as CubeCL kernels (wgpu and the other GPU
//! runtimes): one cube per chain (or, for a small batch, per chain and row segment), then one
//! short kernel that adds the segments and the prior; two launches per call.
//!
//! Why: the tensor program of [`crate::fused::ops_gradient`] issues a few dozen kernels per call and
//! moves every `[C, N, width]` activation through device memory. On an H100 it cost ~2 ms per
//! call at any C ≤ 64 and ~10 µs per chain-gradient beyond (concrete, 16-16 tanh): 0.2 TFLOP/s,
//! far from the card (bench/h100/README.md). Here a cube keeps its chain's θ in
//! shared memory and walks the training rows in blocks of R rows:
//!
//! 1. **row phase** (thread r = row r of the block): forward through every layer, the head's
//!    log likelihood and ∂/∂output, then δ back through the layers. Each thread touches only its
//!    row's columns of the block's activation (`A`) and δ (`D`) tables, so no barrier is needed;
//!    weights are read from shared memory at one address per warp (a broadcast).
//! 2. **gradient phase** (thread t = parameters t, t + R, …): ∂W[i, j] += Σ_rows A[·, i] D[·, j]
//!    (a bias reads the table's column of ones), the sums in the owner's registers. Each
//!    parameter has one owner, so the sums need no atomics and come out in the same order on
//!    every run. With [`GradientTile::TwoByTwo`] a thread owns 2 × 2 blocks of a layer's
//!    weights instead: two `A` and two `D` loads feed four multiply-adds (one load per
//!    multiply-add instead of two), and every sum is the same sum in the same row order.
//!
//! 3. **segments**: the rows fall into segments of two blocks; a cube sums each of its
//!    segments from zero and writes them out, and `finish_kernel` adds a chain's segments in
//!    order, then the prior. A small batch spreads a chain's segments over several cubes; the
//!    order of the sums is the same however they are spread, so a chain's numbers do not
//!    depend on the batch size (batched NUTS gives each chain the moves it makes alone).
//!
//! The tables store a row's columns at stride `A`/`D` width rounded up to an odd number: row
//! threads of a warp then hit 32 different banks, and the gradient phase reads consecutive
//! columns. Shared memory holds D + R (A + D + 1) values; a net too large for the device's
//! shared memory (or the learned-σ head) goes to the tensor program instead. With
//! [`InputColumns::Global`] `A` leaves out the inputs: the first layer reads them from the data
//! buffer, and its weights' sums have their own owners that do the same.

use crate::fused::ops_gradient::DeviceTensors;
use crate::fused::terms::Terms;
use bnn_kernels::{KernelHead, KernelSpec};
use burn::backend::Cube;
use burn::tensor::Shape;
use burn_cubecl::cubecl;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use crate::fused::cube_kernels::{
    activate, activation_code, elem_type, hetero_log_sd, sum_over_cube, FIXED, HETERO_EXP,
    HETERO_SOFTPLUS,
};

/// The categorical head's comptime code (the regression heads' are [`crate::fused::cube_kernels`]').
const CATEGORICAL: u32 = 3;

/// Rows per block (= threads per cube), largest first: the first whose tables fit the device's
/// shared memory. On an H100, 64 beat 128 (2.03 against 2.51 µs per chain-gradient at 1024
/// chains, concrete 16-16: more parameters per thread, more independent sums in flight) and 32.
/// `BNN_DEVICE_BLOCK_ROWS` (a power of two, 16–256) fixes it instead, to compare on a card.
const ROWS_PER_BLOCK: [u32; 3] = [64, 32, 16];

/// Row blocks per segment: the unit of work a cube takes and of the sums [`finish_kernel`] adds.
/// Two blocks (128 rows at R = 64) keep a segment's partial sums small next to its work.
const SEGMENT_BLOCKS: u32 = 2;

/// Cubes a launch aims at: a batch of fewer chains splits each chain's segments over several
/// cubes. Measured on an H200 (concrete 16-16, µs per chain-gradient, bench/h200/README.md):
/// one chain split over 7 cubes took 408 µs against 479 in one cube, but 64 chains split 7 ways
/// took 9.3 µs against 8.1 unsplit, and 256 split 4 ways 4.1 against 3.4. A call's fixed cost
/// (~400 µs at one chain: launches, two read-backs, the autodiff graph) dominates below a few
/// hundred chains, so only batches of fewer than 64 chains split.
const TARGET_CUBES: usize = 64;

/// Parts per chain for `chains` chains of `segments` segments: enough cubes to fill the device,
/// never more parts than segments. `BNN_DEVICE_ROW_SPLITS` fixes it instead (to measure); a value
/// that is not a whole number ≥ 1 is named on stderr once and ignored.
fn splits_for(chains: usize, segments: usize) -> usize {
    static OVERRIDE: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let fixed = *OVERRIDE.get_or_init(|| {
        let value = std::env::var("BNN_DEVICE_ROW_SPLITS").ok()?;
        let parts = value.parse::<usize>().ok().filter(|&s| s >= 1);
        if parts.is_none() {
            eprintln!(
                "warning: BNN_DEVICE_ROW_SPLITS={value:?} is not a whole number ≥ 1; the device \
                 kernel chooses the split itself"
            );
        }
        parts
    });
    fixed
        .unwrap_or_else(|| TARGET_CUBES.div_ceil(chains.max(1)))
        .clamp(1, segments.max(1))
}

/// The shared memory every WebGPU device offers a workgroup (WebGPU's minimum
/// `maxComputeWorkgroupStorageSize`): a model whose f32 tables fit it runs the kernel on any
/// device, so whether it applies is known when the posterior is built.
pub(crate) const GUARANTEED_SHARED_BYTES: usize = 16_384;

/// Whether the kernel covers `spec` in f32 on every device.
pub(crate) fn covers(spec: &KernelSpec) -> bool {
    NetworkPlan::new(
        spec,
        Terms::Posterior,
        true,
        true,
        GUARANTEED_SHARED_BYTES,
        4,
        DeviceLayout::default(),
    )
    .is_some()
}

/// `BNN_DEVICE_BLOCK_ROWS`, read once (plans are built on every call); a value outside 16–256 or
/// not a power of two is named on stderr once and ignored.
fn block_rows_override() -> Option<u32> {
    static OVERRIDE: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *OVERRIDE.get_or_init(|| {
        let value = std::env::var("BNN_DEVICE_BLOCK_ROWS").ok()?;
        let rows = value
            .parse::<u32>()
            .ok()
            .filter(|rows| rows.is_power_of_two() && (16..=256).contains(rows));
        if rows.is_none() {
            eprintln!(
                "warning: BNN_DEVICE_BLOCK_ROWS={value:?} is not a power of two from 16 to 256; \
                 the device kernel chooses its rows per block itself"
            );
        }
        rows
    })
}

/// How the gradient phase gives parameters to threads. The sums are the same, in the same row
/// order, either way; what differs is the shared-memory traffic, whose cost only a GPU shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GradientTile {
    /// One parameter per register sum: each multiply-add loads its `A` and its `D` value. The
    /// kernel measured on the H100 and H200 (bench/h100, bench/h200).
    #[default]
    Single,
    /// 2 × 2 blocks of a layer's `[d_in + 1, d_out]` weights (row 0: the bias, on `A`'s column of
    /// ones): four loads for four multiply-adds, the lever the H100 round named next.
    TwoByTwo,
}

impl GradientTile {
    /// `single` or `2x2` (what `BNN_DEVICE_GRADIENT_TILE` takes, and bench reports).
    pub fn name(self) -> &'static str {
        match self {
            GradientTile::Single => "single",
            GradientTile::TwoByTwo => "2x2",
        }
    }

    /// `BNN_DEVICE_GRADIENT_TILE` (`2x2`, or `1`/`single`), read once; unset:
    /// [`GradientTile::Single`]. The GPU check scripts compare the two on a card this way. Any
    /// other value is named on stderr once and runs the default.
    pub fn from_env() -> Self {
        static CHOSEN: std::sync::OnceLock<GradientTile> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| {
            choice_from_env(
                "BNN_DEVICE_GRADIENT_TILE",
                &[
                    ("2x2", GradientTile::TwoByTwo),
                    ("1", GradientTile::Single),
                    ("single", GradientTile::Single),
                ],
                GradientTile::Single,
            )
        })
    }
}

/// Where the kernel reads a row's inputs `x`. Either way every product and sum is the same;
/// what differs is the shared memory a cube needs (hence how many cubes an SM holds) and
/// where the gradient phase's first-layer loads go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum InputColumns {
    /// Copied into the `A` table beside the hidden activations (the kernel measured on the
    /// H100 and H200).
    #[default]
    Shared,
    /// Read from the data buffer (global memory, cached) by the first layer's forward and its
    /// weights' gradient sums: a row's `A` columns shrink by the input width (concrete: 77 → 69
    /// shared values per row), the third lever the H100 round named.
    Global,
}

impl InputColumns {
    /// `shared` or `global` (what `BNN_DEVICE_INPUT_COLUMNS` takes, and bench reports).
    pub fn name(self) -> &'static str {
        match self {
            InputColumns::Shared => "shared",
            InputColumns::Global => "global",
        }
    }

    /// `BNN_DEVICE_INPUT_COLUMNS` (`global` or `shared`), read once; unset:
    /// [`InputColumns::Shared`]. Any other value is named on stderr once and runs the default.
    pub fn from_env() -> Self {
        static CHOSEN: std::sync::OnceLock<InputColumns> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| {
            choice_from_env(
                "BNN_DEVICE_INPUT_COLUMNS",
                &[
                    ("global", InputColumns::Global),
                    ("shared", InputColumns::Shared),
                ],
                InputColumns::Shared,
            )
        })
    }
}

/// The choice whose name environment variable `var` holds; unset: `default`. Any other value is
/// named on stderr with the names `var` takes, and gives `default` (a measurement that asked
/// for a layout by mistake should say so, not pass as the default silently).
fn choice_from_env<T: Copy>(var: &str, choices: &[(&str, T)], default: T) -> T {
    let Ok(value) = std::env::var(var) else {
        return default;
    };
    if let Some(&(_, choice)) = choices.iter().find(|(name, _)| *name == value) {
        return choice;
    }
    let names: Vec<String> = choices
        .iter()
        .map(|(name, _)| format!("`{name}`"))
        .collect();
    eprintln!(
        "warning: {var}={value:?} is not one of {}; the device kernel keeps its default",
        names.join(", ")
    );
    default
}

/// The device kernel's layout choices: the same numbers under every choice, different speeds
/// on a GPU (the GPU check script measures each against the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceLayout {
    /// How the gradient phase gives parameters to threads.
    pub gradient_tile: GradientTile,
    /// Where the kernel reads a row's inputs.
    pub input_columns: InputColumns,
}

impl DeviceLayout {
    /// `BNN_DEVICE_GRADIENT_TILE` and `BNN_DEVICE_INPUT_COLUMNS`.
    pub fn from_env() -> Self {
        Self {
            gradient_tile: GradientTile::from_env(),
            input_columns: InputColumns::from_env(),
        }
    }
}

/// One layer as the kernel is compiled for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PlannedLayer {
    d_in: u32,
    d_out: u32,
    /// Offsets of the `[d_in, d_out]` row-major weight and of the bias in θ.
    weight: u32,
    bias: u32,
    /// Column of the layer's input in the `A` table (0 is the column of ones). With
    /// [`InputColumns::Global`] the first layer's 1 is where its own output is stored, not its
    /// input: its products read `x` from the data buffer and never read this field.
    a_in: u32,
    /// Column of its activated output in `A` (hidden layers).
    a_out: u32,
    /// Column of its δ in the `D` table (also φ'(z) in between, and the outputs of the last layer).
    d_col: u32,
    /// Index of its first 2 × 2 gradient tile ([`GradientTile::TwoByTwo`]).
    first_tile: u32,
    /// Rows of `[bias; weights]` its tiles cover: d_in + 1, or 1 (the bias) for a first layer
    /// whose weights read the inputs from global memory.
    tile_rows: u32,
}

/// Everything the kernel's loops and offsets need, fixed at compile time (one kernel per model).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NetworkPlan {
    layers: Vec<PlannedLayer>,
    params: u32,
    d_input: u32,
    a_stride: u32,
    d_stride: u32,
    rows_per_block: u32,
    activation: u32,
    head: u32,
    /// Target columns T (regression) or classes K (categorical).
    targets: u32,
    with_gradient: bool,
    posterior: bool,
    laplace: bool,
    /// 2 × 2 tiles in the gradient phase, and how many the layers have in all.
    two_by_two: bool,
    tiles: u32,
    /// Inputs read from global memory ([`InputColumns::Global`]): the first layer's
    /// `input_weights` = d_input × d_out weights then have their own owners, the rest of θ
    /// (`params − input_weights`, in θ's order) the tiles or one-per-thread sums.
    global_inputs: bool,
    input_weights: u32,
}

impl NetworkPlan {
    /// The plan for `spec` with the first block size whose shared memory fits `max_shared_bytes`,
    /// or `None` when the kernel does not cover the model.
    pub(crate) fn new(
        spec: &KernelSpec,
        terms: Terms,
        laplace: bool,
        with_gradient: bool,
        max_shared_bytes: usize,
        value_bytes: usize,
        layout: DeviceLayout,
    ) -> Option<Self> {
        let global_inputs = layout.input_columns == InputColumns::Global;
        let head = match spec.head {
            KernelHead::Fixed { .. } => FIXED,
            KernelHead::Heteroscedastic {
                softplus: false, ..
            } => HETERO_EXP,
            KernelHead::Heteroscedastic { softplus: true, .. } => HETERO_SOFTPLUS,
            KernelHead::Categorical => CATEGORICAL,
            KernelHead::LearnedSigma { .. } => return None,
        };
        let (activation, _) = activation_code(spec.activation);
        let d_input = spec.d_input();
        let last = spec.layers.len().checked_sub(1)?;
        let mut layers = Vec::with_capacity(spec.layers.len());
        let (mut a_next, mut d_next) = (if global_inputs { 1 } else { 1 + d_input }, 0);
        let mut a_in = 1;
        let mut tiles = 0;
        for (l, layer) in spec.layers.iter().enumerate() {
            let a_out = if l < last { a_next } else { 0 };
            if l < last {
                a_next += layer.d_out;
            }
            let tile_rows = if l == 0 && global_inputs {
                1
            } else {
                layer.d_in + 1
            };
            layers.push(PlannedLayer {
                d_in: u32::try_from(layer.d_in).ok()?,
                d_out: u32::try_from(layer.d_out).ok()?,
                weight: u32::try_from(layer.weight_offset).ok()?,
                bias: u32::try_from(layer.bias_offset).ok()?,
                a_in: a_in as u32,
                a_out: a_out as u32,
                d_col: d_next as u32,
                first_tile: tiles,
                tile_rows: u32::try_from(tile_rows).ok()?,
            });
            tiles += u32::try_from(tile_rows.div_ceil(2) * layer.d_out.div_ceil(2)).ok()?;
            a_in = a_out;
            d_next += layer.d_out;
        }
        let odd = |n: usize| n | 1;
        let (a_stride, d_stride) = (odd(a_next), odd(d_next));
        let fits = |r: u32| {
            (spec.dim + r as usize * (a_stride + d_stride + 1)) * value_bytes <= max_shared_bytes
        };
        let rows_per_block = match block_rows_override() {
            Some(r) if fits(r) => r,
            _ => ROWS_PER_BLOCK.into_iter().find(|&r| fits(r))?,
        };
        Some(Self {
            layers,
            params: u32::try_from(spec.dim).ok()?,
            d_input: d_input as u32,
            a_stride: a_stride as u32,
            d_stride: d_stride as u32,
            rows_per_block,
            activation,
            head,
            targets: spec.target_columns as u32,
            with_gradient,
            posterior: terms == Terms::Posterior,
            laplace: laplace && terms == Terms::Posterior,
            two_by_two: layout.gradient_tile == GradientTile::TwoByTwo,
            tiles,
            global_inputs,
            input_weights: if global_inputs {
                u32::try_from(spec.layers[0].d_in * spec.layers[0].d_out).ok()?
            } else {
                0
            },
        })
    }
}

/// (column in `A`, column in `D`) whose products over a block's rows sum to ∂/∂θ[p] (a bias
/// reads `A`'s column of ones); (0, 0) past the last parameter (read, never used).
#[cube]
fn gradient_columns(p: usize, #[comptime] plan: NetworkPlan) -> (u32, u32) {
    let mut a_col = 0usize;
    let mut d_col = 0usize;
    #[unroll]
    for l in 0..comptime![plan.layers.len()] {
        let weight = comptime![plan.layers[l].weight as usize];
        let bias = comptime![plan.layers[l].bias as usize];
        let d_in = comptime![plan.layers[l].d_in as usize];
        let d_out = comptime![plan.layers[l].d_out as usize];
        let a_in = comptime![plan.layers[l].a_in as usize];
        let col = comptime![plan.layers[l].d_col as usize];
        if p >= weight && p < weight + d_in * d_out {
            let q = p - weight;
            a_col = a_in + q / d_out;
            d_col = col + q % d_out;
        }
        if p >= bias && p < bias + d_out {
            a_col = 0;
            d_col = col + (p - bias);
        }
    }
    (a_col as u32, d_col as u32)
}

/// Parameter q of the sums [`gradient_columns`] serves: θ[q], or with the inputs in global
/// memory θ's q-th parameter outside the first layer's weights (their own owners sum those).
#[cube]
fn rest_parameter(q: usize, #[comptime] plan: NetworkPlan) -> usize {
    let mut shift = 0usize;
    if comptime![plan.global_inputs] {
        let weight = comptime![plan.layers[0].weight as usize];
        let skipped = comptime![plan.input_weights as usize];
        if q >= weight {
            shift = skipped;
        }
    }
    q + shift
}

/// First-layer weight q (θ[weight₀ + q]) with the inputs in global memory: its column of `x`
/// and of `D`; (0, first δ column) past the last (read, never used).
#[cube]
fn input_weight_columns(q: usize, #[comptime] plan: NetworkPlan) -> (u32, u32) {
    let d_out = comptime![plan.layers[0].d_out as usize];
    let col = comptime![plan.layers[0].d_col as usize];
    let count = comptime![plan.input_weights as usize];
    let mut x_col = 0usize;
    let mut d_col = col.runtime();
    if q < count {
        x_col = q / d_out;
        d_col = col + q % d_out;
    }
    (x_col as u32, d_col as u32)
}

/// Tile q of the 2 × 2 gradient tiles: its rows' two `A` columns, its columns' two `D`
/// columns, and its four parameters (row-major: (0, 0), (0, 1), (1, 0), (1, 1)). A layer's
/// tiles walk its `[d_in + 1, d_out]` block (row 0 the bias) two rows and two columns at a time.
/// A slot past the layer's last row or column reads column 0 of `A` (or the tile's first `D`
/// column) and gets parameter index P, never written; so does every slot of a tile past the last.
#[cube]
#[allow(clippy::type_complexity)]
fn gradient_tile(
    q: usize,
    #[comptime] plan: NetworkPlan,
) -> (u32, u32, u32, u32, u32, u32, u32, u32) {
    let params = comptime![plan.params as usize];
    let mut a0 = 0usize;
    let mut a1 = 0usize;
    let mut d0 = 0usize;
    let mut d1 = 0usize;
    let mut p00 = params.runtime();
    let mut p01 = params.runtime();
    let mut p10 = params.runtime();
    let mut p11 = params.runtime();
    #[unroll]
    for l in 0..comptime![plan.layers.len()] {
        let first = comptime![plan.layers[l].first_tile as usize];
        let d_out = comptime![plan.layers[l].d_out as usize];
        let across = comptime![(plan.layers[l].d_out as usize).div_ceil(2)];
        let tile_rows = comptime![plan.layers[l].tile_rows as usize];
        let count = comptime![
            (plan.layers[l].tile_rows as usize).div_ceil(2)
                * (plan.layers[l].d_out as usize).div_ceil(2)
        ];
        let weight = comptime![plan.layers[l].weight as usize];
        let bias = comptime![plan.layers[l].bias as usize];
        let a_in = comptime![plan.layers[l].a_in as usize];
        let col = comptime![plan.layers[l].d_col as usize];
        if q >= first && q < first + count {
            let local = q - first;
            // Rows e0 = 2i, e1 = 2i + 1 of [bias; weights]: row e > 0 is input e − 1.
            let e0 = 2 * (local / across);
            let e1 = e0 + 1;
            let j0 = 2 * (local % across);
            let j1 = j0 + 1;
            d0 = col + j0;
            d1 = col + j0;
            if j1 < d_out {
                d1 = col + j1;
            }
            if e0 == 0 {
                a0 = 0;
                p00 = bias + j0;
            } else {
                a0 = a_in + e0 - 1;
                p00 = weight + (e0 - 1) * d_out + j0;
            }
            if j1 < d_out {
                p01 = p00 + 1;
            }
            if e1 < tile_rows {
                a1 = a_in + e1 - 1;
                p10 = weight + (e1 - 1) * d_out + j0;
                if j1 < d_out {
                    p11 = p10 + 1;
                }
            }
        }
    }
    (
        a0 as u32, a1 as u32, d0 as u32, d1 as u32, p00 as u32, p01 as u32, p10 as u32, p11 as u32,
    )
}

/// θ `[C, P]` → each row segment's sums: per thread, the log likelihood of its rows
/// (`ll_parts` `[C, G, R]`) and, per parameter, ∂/∂θ over the segment's rows (`grad_parts`
/// `[C, G, P]`). One cube of R threads per (chain, part): part `s` of `splits` takes segments
/// `s`, `s + splits`, …, so a small batch still fills the device. Every segment's sums start
/// from zero whoever computes them, and [`finish_kernel`] adds them in segment order: a chain's
/// numbers do not depend on the split, hence not on the batch size.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
// CubeCL code: `if comptime![..]` is resolved when the kernel is expanded, so it stays its own
// `if`, and the runtime row-block count is written out rather than with `div_ceil`.
#[allow(clippy::collapsible_if, clippy::manual_div_ceil)]
fn network_kernel<F: Float>(
    theta: &[F],
    x: &[F],
    y: &[F],
    ll_parts: &mut [F],
    grad_parts: &mut [F],
    rows: u32,
    chains: u32,
    splits: u32,
    segments: u32,
    slope: f32,
    head_a: f32,
    head_b: f32,
    #[comptime] plan: NetworkPlan,
    #[define(F)] _elem: ElemType,
) {
    let chain = CUBE_POS / splits as usize;
    let part = CUBE_POS % splits as usize;
    if chain >= chains as usize {
        terminate!();
    }
    let t = UNIT_POS as usize;
    let block_rows = comptime![plan.rows_per_block as usize];
    let params = comptime![plan.params as usize];
    let sa = comptime![plan.a_stride as usize];
    let sd = comptime![plan.d_stride as usize];
    let d_input = comptime![plan.d_input as usize];
    let targets = comptime![plan.targets as usize];
    let n_layers = comptime![plan.layers.len()];
    let last = comptime![plan.layers.len() - 1];
    let zero = F::new(0.0);
    let one = F::new(1.0);
    let half = F::new(0.5);
    let slope = F::cast_from(slope);

    let mut th = Shared::<[F]>::new_slice(params);
    let mut act = Shared::<[F]>::new_slice(comptime![
        plan.rows_per_block as usize * plan.a_stride as usize
    ]);
    let mut del = Shared::<[F]>::new_slice(comptime![
        plan.rows_per_block as usize * plan.d_stride as usize
    ]);

    let base = chain * params;
    let mut p = t;
    while p < params {
        th[p] = theta[base + p];
        p += block_rows;
    }
    // Thread t owns parameters t, t + R, … (or 2 × 2 tiles t, t + R, …): their running sums
    // and table columns stay in registers for the whole call (independent sums, so the unrolled
    // row loop below has several chains of multiply-adds in flight).
    let two_by_two = comptime![plan.two_by_two];
    let owned_tiles = comptime![plan.tiles.div_ceil(plan.rows_per_block) as usize];
    let owned = comptime![if plan.two_by_two {
        4 * plan.tiles.div_ceil(plan.rows_per_block) as usize
    } else {
        (plan.params - plan.input_weights).div_ceil(plan.rows_per_block) as usize
    }];
    let owned_cols = comptime![if plan.two_by_two {
        2 * plan.tiles.div_ceil(plan.rows_per_block) as usize
    } else {
        (plan.params - plan.input_weights).div_ceil(plan.rows_per_block) as usize
    }];
    // With the inputs in global memory the first layer's weights have their own owners
    // (t, t + R, … of d_input × d_out), their `x` and `D` columns in registers; one unused slot
    // otherwise.
    let global_inputs = comptime![plan.global_inputs];
    let input_weights = comptime![plan.input_weights as usize];
    let owned_inputs = comptime![plan.input_weights.div_ceil(plan.rows_per_block).max(1) as usize];
    let mut acc_x = Array::<F>::new(owned_inputs);
    let mut x_cols = Array::<u32>::new(owned_inputs);
    let mut dx_cols = Array::<u32>::new(owned_inputs);
    #[unroll]
    for k in 0..owned_inputs {
        acc_x[k] = zero;
        let (x_col, d_col) = input_weight_columns(t + k * block_rows, comptime![plan.clone()]);
        x_cols[k] = x_col;
        dx_cols[k] = d_col;
    }
    let mut acc = Array::<F>::new(owned);
    let mut a_cols = Array::<u32>::new(owned_cols);
    let mut d_cols = Array::<u32>::new(owned_cols);
    #[unroll]
    for k in 0..owned {
        acc[k] = zero;
    }
    if comptime![two_by_two] {
        #[unroll]
        for k in 0..owned_tiles {
            let (a0, a1, d0, d1, _p00, _p01, _p10, _p11) =
                gradient_tile(t + k * block_rows, comptime![plan.clone()]);
            a_cols[2 * k] = a0;
            a_cols[2 * k + 1] = a1;
            d_cols[2 * k] = d0;
            d_cols[2 * k + 1] = d1;
        }
    } else {
        #[unroll]
        for k in 0..owned {
            let p = rest_parameter(t + k * block_rows, comptime![plan.clone()]);
            let (a_col, d_col) = gradient_columns(p, comptime![plan.clone()]);
            a_cols[k] = a_col;
            d_cols[k] = d_col;
        }
    }
    let ar = t * sa;
    let dr = t * sd;
    act[ar] = one;
    sync_cube();

    let n_rows = rows as usize;
    let blocks = (n_rows + block_rows - 1) / block_rows;
    let segment_blocks = comptime![SEGMENT_BLOCKS as usize];
    let mut segment = part;
    while segment < segments as usize {
        let mut ll = zero;
        #[unroll]
        for k in 0..owned {
            acc[k] = zero;
        }
        #[unroll]
        for k in 0..owned_inputs {
            acc_x[k] = zero;
        }
        let first = segment * segment_blocks;
        let end = min(first + segment_blocks, blocks);
        for block in first..end {
            // Row phase: thread t owns row n of the block. A row past the end computes on the last
            // row's inputs (finite) and contributes nothing: its ∂/∂output is set to 0.
            let n = block * block_rows + t;
            let valid = n < n_rows;
            let nr = min(n, n_rows - 1);
            if comptime![!global_inputs] {
                for i in 0..d_input {
                    act[ar + 1 + i] = x[nr * d_input + i];
                }
            }
            #[unroll]
            for l in 0..n_layers {
                let d_in = comptime![plan.layers[l].d_in as usize];
                let d_out = comptime![plan.layers[l].d_out as usize];
                let w = comptime![plan.layers[l].weight as usize];
                let b = comptime![plan.layers[l].bias as usize];
                let a_in = comptime![plan.layers[l].a_in as usize];
                let a_out = comptime![plan.layers[l].a_out as usize];
                let dc = comptime![plan.layers[l].d_col as usize];
                // Four units at a time: each input value read once for four weights.
                // Unrolled: constant offsets, no loop counters, loads scheduled early. Every layer is
                // small here: θ fits in shared memory (below 4096 values in 16 KiB).
                #[unroll]
                for group in 0..comptime![(plan.layers[l].d_out as usize).div_ceil(4)] {
                    let j = group * 4;
                    let j1 = min(j + 1, d_out - 1);
                    let j2 = min(j + 2, d_out - 1);
                    let j3 = min(j + 3, d_out - 1);
                    let mut z0 = th[b + j];
                    let mut z1 = th[b + j1];
                    let mut z2 = th[b + j2];
                    let mut z3 = th[b + j3];
                    #[unroll]
                    for i in 0..d_in {
                        let v = if comptime![l == 0 && global_inputs] {
                            x[nr * d_input + i]
                        } else {
                            act[ar + a_in + i]
                        };
                        let row = w + i * d_out;
                        z0 += th[row + j] * v;
                        z1 += th[row + j1] * v;
                        z2 += th[row + j2] * v;
                        z3 += th[row + j3] * v;
                    }
                    if comptime![l == last] {
                        del[dr + dc + j] = z0;
                        del[dr + dc + j1] = z1;
                        del[dr + dc + j2] = z2;
                        del[dr + dc + j3] = z3;
                    } else {
                        let (a0, g0) = activate::<F>(z0, slope, comptime![plan.activation]);
                        let (a1, g1) = activate::<F>(z1, slope, comptime![plan.activation]);
                        let (a2, g2) = activate::<F>(z2, slope, comptime![plan.activation]);
                        let (a3, g3) = activate::<F>(z3, slope, comptime![plan.activation]);
                        act[ar + a_out + j] = a0;
                        act[ar + a_out + j1] = a1;
                        act[ar + a_out + j2] = a2;
                        act[ar + a_out + j3] = a3;
                        del[dr + dc + j] = g0;
                        del[dr + dc + j1] = g1;
                        del[dr + dc + j2] = g2;
                        del[dr + dc + j3] = g3;
                    }
                }
            }

            // Head: the row's log likelihood (without constants) and ∂/∂output in place of the outputs.
            let oc = comptime![plan.layers[plan.layers.len() - 1].d_col as usize];
            let mut row_ll = zero;
            if comptime![plan.head == FIXED] {
                let precision = F::cast_from(head_a);
                for k in 0..targets {
                    let r = y[nr * targets + k] - del[dr + oc + k];
                    row_ll += r * r;
                    del[dr + oc + k] = select(valid, r * precision, zero);
                }
                row_ll = -half * precision * row_ll;
            } else if comptime![plan.head == CATEGORICAL] {
                let mut m = del[dr + oc];
                for k in 1..targets {
                    m = max(m, del[dr + oc + k]);
                }
                let mut total = zero;
                let mut mass = zero;
                for k in 0..targets {
                    total += F::exp(del[dr + oc + k] - m);
                    mass += y[nr * targets + k];
                }
                let lse = m + F::ln(total);
                for k in 0..targets {
                    let log_p = del[dr + oc + k] - lse;
                    let label = y[nr * targets + k];
                    row_ll += label * log_p;
                    del[dr + oc + k] = select(valid, label - F::exp(log_p) * mass, zero);
                }
            } else {
                let lo = F::cast_from(head_a);
                let hi = F::cast_from(head_b);
                for k in 0..targets {
                    let mean = del[dr + oc + k];
                    let raw = del[dr + oc + targets + k];
                    let (log_sd, dlog_sd) =
                        hetero_log_sd::<F>(raw, lo, hi, comptime![plan.head == HETERO_SOFTPLUS]);
                    let inv_sd = F::exp(-log_sd);
                    let z = (y[nr * targets + k] - mean) * inv_sd;
                    row_ll += -half * z * z - log_sd;
                    del[dr + oc + k] = select(valid, z * inv_sd, zero);
                    del[dr + oc + targets + k] = select(valid, (z * z - one) * dlog_sd, zero);
                }
            }
            ll += select(valid, row_ll, zero);

            if comptime![plan.with_gradient] {
                // δ back through the layers: δ_{l−1} = φ'(z_{l−1}) ⊙ (W_l δ_l), four units at a time.
                #[unroll]
                for q in 0..comptime![plan.layers.len() - 1] {
                    let l = comptime![plan.layers.len() - 1 - q];
                    let d_in = comptime![plan.layers[l].d_in as usize];
                    let d_out = comptime![plan.layers[l].d_out as usize];
                    let w = comptime![plan.layers[l].weight as usize];
                    let dc = comptime![plan.layers[l].d_col as usize];
                    let below = comptime![plan.layers[l - 1].d_col as usize];
                    #[unroll]
                    for group in 0..comptime![(plan.layers[l].d_in as usize).div_ceil(4)] {
                        let i = group * 4;
                        let i1 = min(i + 1, d_in - 1);
                        let i2 = min(i + 2, d_in - 1);
                        let i3 = min(i + 3, d_in - 1);
                        let mut s0 = zero;
                        let mut s1 = zero;
                        let mut s2 = zero;
                        let mut s3 = zero;
                        #[unroll]
                        for j in 0..d_out {
                            let g = del[dr + dc + j];
                            s0 += th[w + i * d_out + j] * g;
                            s1 += th[w + i1 * d_out + j] * g;
                            s2 += th[w + i2 * d_out + j] * g;
                            s3 += th[w + i3 * d_out + j] * g;
                        }
                        // Clamped duplicates (i1 = i at the end) write the same value twice.
                        let d0 = del[dr + below + i];
                        let d1 = del[dr + below + i1];
                        let d2 = del[dr + below + i2];
                        let d3 = del[dr + below + i3];
                        del[dr + below + i] = d0 * s0;
                        if i1 != i {
                            del[dr + below + i1] = d1 * s1;
                        }
                        if i2 != i {
                            del[dr + below + i2] = d2 * s2;
                        }
                        if i3 != i {
                            del[dr + below + i3] = d3 * s3;
                        }
                    }
                }
                sync_cube();
                // Gradient phase: each parameter summed over the block's rows by its owner.
                if comptime![global_inputs] {
                    // The first layer's weights: row r's inputs from `x` (a row past the end
                    // reads the last row, as the row phase did, against its zero δ).
                    let block_first = block * block_rows;
                    #[unroll]
                    for r in 0..block_rows {
                        let row = min(block_first + r, n_rows - 1);
                        #[unroll]
                        for k in 0..owned_inputs {
                            acc_x[k] += x[row * d_input + x_cols[k] as usize]
                                * del[r * sd + dx_cols[k] as usize];
                        }
                    }
                }
                if comptime![two_by_two] {
                    #[unroll]
                    for r in 0..block_rows {
                        #[unroll]
                        for k in 0..owned_tiles {
                            let a0 = act[r * sa + a_cols[2 * k] as usize];
                            let a1 = act[r * sa + a_cols[2 * k + 1] as usize];
                            let d0 = del[r * sd + d_cols[2 * k] as usize];
                            let d1 = del[r * sd + d_cols[2 * k + 1] as usize];
                            acc[4 * k] += a0 * d0;
                            acc[4 * k + 1] += a0 * d1;
                            acc[4 * k + 2] += a1 * d0;
                            acc[4 * k + 3] += a1 * d1;
                        }
                    }
                } else {
                    #[unroll]
                    for r in 0..block_rows {
                        #[unroll]
                        for k in 0..owned {
                            acc[k] +=
                                act[r * sa + a_cols[k] as usize] * del[r * sd + d_cols[k] as usize];
                        }
                    }
                }
            }
            sync_cube();
        }
        let slot = chain * segments as usize + segment;
        ll_parts[slot * block_rows + t] = ll;
        if comptime![plan.with_gradient] {
            if comptime![two_by_two] {
                #[unroll]
                for k in 0..owned_tiles {
                    let (_a0, _a1, _d0, _d1, p00, p01, p10, p11) =
                        gradient_tile(t + k * block_rows, comptime![plan.clone()]);
                    let out = slot * params;
                    if (p00 as usize) < params {
                        grad_parts[out + p00 as usize] = acc[4 * k];
                    }
                    if (p01 as usize) < params {
                        grad_parts[out + p01 as usize] = acc[4 * k + 1];
                    }
                    if (p10 as usize) < params {
                        grad_parts[out + p10 as usize] = acc[4 * k + 2];
                    }
                    if (p11 as usize) < params {
                        grad_parts[out + p11 as usize] = acc[4 * k + 3];
                    }
                }
            } else {
                #[unroll]
                for k in 0..owned {
                    let p = rest_parameter(t + k * block_rows, comptime![plan.clone()]);
                    if p < params {
                        grad_parts[slot * params + p] = acc[k];
                    }
                }
            }
            if comptime![global_inputs] {
                let weight = comptime![plan.layers[0].weight as usize];
                #[unroll]
                for k in 0..owned_inputs {
                    let q = t + k * block_rows;
                    if q < input_weights {
                        grad_parts[slot * params + weight + q] = acc_x[k];
                    }
                }
            }
        }
        segment += splits as usize;
    }
}

/// The segments' sums → log density `[C]` (and ∂/∂θ `[C, P]`), one cube of R threads per chain:
/// thread t adds its segment sums in segment order, then the prior of the parameters it owns
/// (t, t + R, …), and the threads' totals meet in a fixed tree.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
#[allow(clippy::collapsible_if)]
fn finish_kernel<F: Float>(
    theta: &[F],
    ll_parts: &[F],
    grad_parts: &[F],
    quadratic: &[F],
    absolute: &[F],
    values: &mut [F],
    gradient: &mut [F],
    chains: u32,
    segments: u32,
    constant: f32,
    #[comptime] plan: NetworkPlan,
    #[define(F)] _elem: ElemType,
) {
    let chain = CUBE_POS;
    if chain >= chains as usize {
        terminate!();
    }
    let t = UNIT_POS as usize;
    let block_rows = comptime![plan.rows_per_block as usize];
    let params = comptime![plan.params as usize];
    let owned = comptime![plan.params.div_ceil(plan.rows_per_block) as usize];
    let zero = F::new(0.0);
    let one = F::new(1.0);
    let half = F::new(0.5);
    let mut partial = Shared::<[F]>::new_slice(block_rows);
    let base = chain * params;
    let first_slot = chain * segments as usize;

    let mut own = zero;
    for g in 0..segments as usize {
        own += ll_parts[(first_slot + g) * block_rows + t];
    }
    #[unroll]
    for k in 0..owned {
        let p = t + k * block_rows;
        let mut v = zero;
        let mut g = zero;
        if p < params {
            v = theta[base + p];
            if comptime![plan.with_gradient] {
                for s in 0..segments as usize {
                    g += grad_parts[(first_slot + s) * params + p];
                }
            }
        }
        if comptime![plan.posterior] {
            if p < params {
                let q = quadratic[p];
                own += -half * (q * v) * v;
                g += -(q * v);
                if comptime![plan.laplace] {
                    let b = absolute[p];
                    let sign = select(v > zero, one, select(v < zero, -one, zero));
                    own += -(b * F::abs(v));
                    g += -(b * sign);
                }
            }
        }
        if comptime![plan.with_gradient] {
            if p < params {
                gradient[base + p] = g;
            }
        }
    }
    partial[t] = own;
    sync_cube();
    sum_over_cube::<F>(&mut partial, t, comptime![plan.rows_per_block]);
    if t == 0 {
        values[chain] = partial[0] + F::cast_from(constant);
    }
}

/// Log density `[C]` and, when asked, gradient `[C, D]` of θ `[C, D]` in one launch, or `None`
/// when the kernel does not cover the model or the device (then the caller runs the tensor
/// program). `constant`: the prior's constant (added for the posterior).
pub(crate) fn evaluate(
    spec: &KernelSpec,
    data: &DeviceTensors<Cube>,
    prior_constant: f64,
    theta: CubeTensor,
    terms: Terms,
    with_gradient: bool,
    layout: DeviceLayout,
) -> Option<(CubeTensor, Option<CubeTensor>)> {
    let elem = elem_type(theta.dtype)?;
    let client = theta.client.clone();
    let max_shared = client.properties().hardware.max_shared_memory_size;
    let plan = NetworkPlan::new(
        spec,
        terms,
        data.has_laplace(),
        with_gradient,
        max_shared,
        theta.dtype.size(),
        layout,
    )?;
    let shape = theta.meta.shape().clone();
    let (c, d) = (shape[0], shape[1]);
    if d != spec.dim || c == 0 || c > u32::MAX as usize {
        return None;
    }
    let rows = data.rows();
    let (head_a, head_b) = match spec.head {
        KernelHead::Fixed { sigma } => (1.0 / (sigma * sigma), 0.0),
        KernelHead::Heteroscedastic {
            softplus: false,
            sigma_min,
            sigma_max,
        } => (sigma_min.ln(), sigma_max.ln()),
        KernelHead::Heteroscedastic {
            softplus: true,
            sigma_min,
            sigma_max,
        } => (sigma_min, sigma_max),
        KernelHead::Categorical => (0.0, 0.0),
        KernelHead::LearnedSigma { .. } => return None,
    };
    let (_, slope) = activation_code(spec.activation);
    let outputs = spec.layers.last()?.d_out;
    let mut constant = crate::fused::ops_gradient::head_constant(spec.head, rows, outputs);
    if terms == Terms::Posterior {
        constant += prior_constant;
    }
    let theta = burn_cubecl::kernel::into_contiguous(theta);
    let values = empty_device_dtype(
        client.clone(),
        theta.device.clone(),
        Shape::new([c]),
        theta.dtype,
    );
    let gradient = with_gradient.then(|| {
        empty_device_dtype(
            client.clone(),
            theta.device.clone(),
            Shape::new([c, d]),
            theta.dtype,
        )
    });
    // A value-only call binds a one-value buffer in the gradient's place (never written).
    let gradient_arg = gradient.clone().unwrap_or_else(|| {
        empty_device_dtype(
            client.clone(),
            theta.device.clone(),
            Shape::new([1]),
            theta.dtype,
        )
    });
    let (quadratic, absolute) = data.prior_tensors();
    let absolute = absolute.unwrap_or_else(|| quadratic.clone());
    let r = plan.rows_per_block as usize;
    let segments = rows.div_ceil(r).div_ceil(SEGMENT_BLOCKS as usize).max(1);
    let splits = splits_for(c, segments);
    let parts = |n: usize| {
        empty_device_dtype(
            client.clone(),
            theta.device.clone(),
            Shape::new([n]),
            theta.dtype,
        )
    };
    let ll_parts = parts(c * segments * r);
    let grad_parts = parts(if with_gradient { c * segments * d } else { 1 });
    // One cube per (chain, part), then one per chain, over two grid axes past the device's
    // per-axis limit.
    let max_x = client.properties().hardware.max_cube_count.0.max(1) as usize;
    let grid = |n: usize| CubeCount::Static(n.min(max_x) as u32, n.div_ceil(max_x) as u32, 1);
    let (x, y) = data.data_tensors();
    network_kernel::launch(
        &client,
        grid(c * splits),
        CubeDim::new_1d(plan.rows_per_block),
        theta.clone().into_buffer_arg(),
        x.into_buffer_arg(),
        y.into_buffer_arg(),
        ll_parts.clone().into_buffer_arg(),
        grad_parts.clone().into_buffer_arg(),
        rows as u32,
        c as u32,
        splits as u32,
        segments as u32,
        slope,
        head_a as f32,
        head_b as f32,
        plan.clone(),
        elem,
    );
    finish_kernel::launch(
        &client,
        grid(c),
        CubeDim::new_1d(plan.rows_per_block),
        theta.into_buffer_arg(),
        ll_parts.into_buffer_arg(),
        grad_parts.into_buffer_arg(),
        quadratic.into_buffer_arg(),
        absolute.into_buffer_arg(),
        values.clone().into_buffer_arg(),
        gradient_arg.into_buffer_arg(),
        c as u32,
        segments as u32,
        constant as f32,
        plan,
        elem,
    );
    Some((values, gradient))
}

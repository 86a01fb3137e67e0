//! Many chains' isokinetic McLachlan paths (MCLMC's burn-in steps, MAMS's trajectories, LAPS)
//! run on a CubeCL device from start to end: positions, velocities, gradients and the kinetic
//! energy sums stay on the device for the whole path, the fused gradient kernel evaluates each
//! stage, and one kernel per kick updates every chain's velocity (and drifts its position); the
//! host uploads once and reads back once per path, instead of a round trip and host passes
//! over `[C, D]` per gradient (issue 48: on an H200 LAPS's host work between gradients held its
//! run to 47% of the kernel's throughput).
//!
//! The arithmetic is the host path's (`bnn_sampler::dynamics::isokinetic`) in the posterior's
//! float type: the same closed-form kick, the same McLachlan stages, a chain that meets a
//! non-finite value stops there. The velocity is normalized by its summed norm (the host uses a
//! closed form and falls back to the sum where that cancels).

use bnn_sampler::{IsokineticPath, LogDensityError, MCLACHLAN_B1};
use burn::backend::ops::{TransactionOps, TransactionPrimitive};
use burn::backend::tensor::FloatTensor;
use burn::backend::Cube;
use burn::tensor::{DType, TensorData};
use burn_cubecl::cubecl;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeDevice;
use cubecl::prelude::*;

use crate::fused::cube_kernels::{elem_type, sum_over_cube};

/// Units of one chain's cube; a power of two (the reductions halve it) within every device's
/// guaranteed 128 invocations per workgroup.
const KICK_UNITS: u32 = 128;

/// One isokinetic kick per chain (cube `c` is chain `c`) of step `step` of its path, for the
/// time `time · ε_c`: under the force `f = g ⊙ s`, `u ← normalize(a f + 2ζ u)` with the closed
/// form's `a` and `ζ`, the kinetic energy change added to `kinetic[c]`, then (with
/// `with_drift`) `x += ε_c/2 · s ⊙ u`. `s` is one `[D]` row for all chains or a row per chain
/// (`scale_per_chain`). Right after a gradient evaluation (`after_evaluation`) the kick first
/// counts it and stops a chain whose value or gradient is not finite (`failed[c] = 1`); a
/// failed chain, or one whose `steps[c]` are done, is not moved.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn isokinetic_kick_kernel<F: Float>(
    velocity: &mut [F],
    gradient: &[F],
    scale: &[F],
    position: &mut [F],
    log_density: &[F],
    kinetic: &mut [F],
    evaluations: &mut [F],
    failed: &mut [F],
    step_size: &[F],
    steps: &[F],
    chains: u32,
    dim: u32,
    step_index: u32,
    time: f32,
    #[comptime] with_drift: bool,
    #[comptime] after_evaluation: bool,
    #[comptime] scale_per_chain: bool,
    #[define(F)] _elem: ElemType,
) {
    let chain = CUBE_POS;
    if chain >= chains as usize {
        terminate!();
    }
    let zero = F::new(0.0);
    let one = F::new(1.0);
    if failed[chain] > zero || F::cast_from(step_index) >= steps[chain] {
        terminate!();
    }
    let t = UNIT_POS as usize;
    let units = comptime![KICK_UNITS as usize];
    let d = dim as usize;
    let base = chain * d;
    let mut scale_base = 0;
    if comptime![scale_per_chain] {
        scale_base = base;
    }
    let epsilon = step_size[chain];
    let drift = F::new(0.5) * epsilon;
    let mut first = Shared::<[F]>::new_slice(comptime![KICK_UNITS as usize]);
    let mut second = Shared::<[F]>::new_slice(comptime![KICK_UNITS as usize]);

    // |f|² and f·u.
    let mut square = zero;
    let mut dot = zero;
    let mut k = t;
    while k < d {
        let f = gradient[base + k] * scale[scale_base + k];
        square += f * f;
        dot += f * velocity[base + k];
        k += units;
    }
    first[t] = square;
    second[t] = dot;
    sync_cube();
    sum_over_cube::<F>(&mut first, t, KICK_UNITS);
    sum_over_cube::<F>(&mut second, t, KICK_UNITS);
    let total_square = first[0];
    let total_dot = second[0];
    // Everyone has read the sums before `first` is written again.
    sync_cube();

    if comptime![after_evaluation] {
        let value = log_density[chain];
        // A non-finite gradient makes |f|² non-finite; NaN fails every comparison.
        let largest = F::max_value();
        let bad = !(F::abs(value) <= largest && total_square <= largest);
        if t == 0 {
            evaluations[chain] += one;
            if bad {
                failed[chain] = one;
            }
        }
        if bad {
            terminate!();
        }
    }

    let norm = F::sqrt(total_square);
    if norm == zero || d < 2 {
        // No direction to turn to: the velocity stays, the position drifts.
        if comptime![with_drift] {
            let mut k = t;
            while k < d {
                position[base + k] += drift * velocity[base + k] * scale[scale_base + k];
                k += units;
            }
        }
        terminate!();
    }
    let dims_minus_one = F::cast_from(dim - 1);
    let delta = F::cast_from(time) * epsilon * norm / dims_minus_one;
    let zeta = F::exp(-delta);
    let projection = total_dot / norm;
    let along = (one - zeta) * (one + zeta + projection * (one - zeta)) / norm;
    let twice_zeta = F::new(2.0) * zeta;

    let mut speed = zero;
    let mut k = t;
    while k < d {
        let u =
            along * (gradient[base + k] * scale[scale_base + k]) + twice_zeta * velocity[base + k];
        velocity[base + k] = u;
        speed += u * u;
        k += units;
    }
    first[t] = speed;
    sync_cube();
    sum_over_cube::<F>(&mut first, t, KICK_UNITS);
    let inverse_norm = one / F::sqrt(first[0]);
    let mut k = t;
    while k < d {
        let u = velocity[base + k] * inverse_norm;
        velocity[base + k] = u;
        if comptime![with_drift] {
            position[base + k] += drift * (u * scale[scale_base + k]);
        }
        k += units;
    }
    if t == 0 {
        kinetic[chain] += dims_minus_one
            * (delta - F::new(std::f32::consts::LN_2)
                + F::ln(one + projection + (one - projection) * zeta * zeta));
    }
}

/// The device buffers of a batch of paths.
struct PathBuffers {
    position: CubeTensor,
    velocity: CubeTensor,
    gradient: CubeTensor,
    log_density: CubeTensor,
    /// `√Σ`: `[D]` shared by every chain, or `[C, D]`.
    scale: CubeTensor,
    scale_per_chain: bool,
    step_size: CubeTensor,
    steps: CubeTensor,
    kinetic: CubeTensor,
    evaluations: CubeTensor,
    failed: CubeTensor,
    chains: usize,
    dim: usize,
}

impl PathBuffers {
    /// Step `step_index`'s kick of `time · ε` on every chain still moving, then half a step's
    /// drift when `with_drift`.
    fn kick(
        &self,
        step_index: usize,
        time: f64,
        with_drift: bool,
        after_evaluation: bool,
        elem: ElemType,
    ) {
        let client = &self.position.client;
        let max_x = client.properties().hardware.max_cube_count.0.max(1) as usize;
        let c = self.chains;
        let grid = CubeCount::Static(c.min(max_x) as u32, c.div_ceil(max_x) as u32, 1);
        isokinetic_kick_kernel::launch(
            client,
            grid,
            CubeDim::new_1d(KICK_UNITS),
            self.velocity.clone().into_buffer_arg(),
            self.gradient.clone().into_buffer_arg(),
            self.scale.clone().into_buffer_arg(),
            self.position.clone().into_buffer_arg(),
            self.log_density.clone().into_buffer_arg(),
            self.kinetic.clone().into_buffer_arg(),
            self.evaluations.clone().into_buffer_arg(),
            self.failed.clone().into_buffer_arg(),
            self.step_size.clone().into_buffer_arg(),
            self.steps.clone().into_buffer_arg(),
            c as u32,
            self.dim as u32,
            step_index as u32,
            time as f32,
            with_drift,
            after_evaluation,
            self.scale_per_chain,
            elem,
        );
    }
}

/// Runs `paths` (fresh) to their ends on the CubeCL device `device` in float type `dtype`, path
/// `i` with the step size and `√Σ` of `parameters[i]`, `evaluate(θ)` giving log density `[C]`
/// and gradient `[C, D]` on the device; `None` where the float type has no kernel. Paths of
/// different lengths share the launches: a path whose steps are done waits (its position is
/// evaluated again, and nothing else happens to it).
pub(crate) fn integrate(
    device: &CubeDevice,
    dtype: DType,
    paths: &mut [IsokineticPath],
    parameters: &[(f64, &[f64])],
    evaluate: impl Fn(CubeTensor) -> (CubeTensor, CubeTensor),
) -> Option<Result<(), LogDensityError>> {
    let elem = elem_type(dtype)?;
    let c = paths.len();
    let d = parameters.first()?.1.len();
    if c > u32::MAX as usize || d > u32::MAX as usize || parameters.len() != c {
        return None;
    }
    // Step counts travel as floats: exact below 2^24.
    let longest = paths.iter().map(|p| p.steps_left).max()?;
    if longest >= 1 << 24 {
        return None;
    }
    let gather = |rows: &mut dyn Iterator<Item = &[f64]>| {
        let mut flat = Vec::with_capacity(c * d);
        rows.for_each(|row| flat.extend_from_slice(row));
        flat
    };
    let (_, first_scale) = parameters[0];
    let scale_per_chain = parameters
        .iter()
        .any(|&(_, s)| !(std::ptr::eq(s, first_scale) || s == first_scale));
    let scale = if scale_per_chain {
        upload(
            gather(&mut parameters.iter().map(|&(_, s)| s)),
            vec![c, d],
            dtype,
            device,
        )
    } else {
        upload(first_scale.to_vec(), vec![d], dtype, device)
    };
    let per_chain = |value: fn(&IsokineticPath) -> f64| {
        upload(paths.iter().map(value).collect(), vec![c], dtype, device)
    };
    let mut buffers = PathBuffers {
        position: upload(
            gather(&mut paths.iter().map(|p| p.position.as_slice())),
            vec![c, d],
            dtype,
            device,
        ),
        velocity: upload(
            gather(&mut paths.iter().map(|p| p.velocity.as_slice())),
            vec![c, d],
            dtype,
            device,
        ),
        gradient: upload(
            gather(&mut paths.iter().map(|p| p.gradient.as_slice())),
            vec![c, d],
            dtype,
            device,
        ),
        log_density: per_chain(|p| p.log_density),
        scale,
        scale_per_chain,
        step_size: upload(
            parameters.iter().map(|&(e, _)| e).collect(),
            vec![c],
            dtype,
            device,
        ),
        steps: per_chain(|p| p.steps_left as f64),
        kinetic: per_chain(|_| 0.0),
        evaluations: per_chain(|_| 0.0),
        failed: per_chain(|_| 0.0),
        chains: c,
        dim: d,
    };
    for step in 0..longest {
        buffers.kick(step, MCLACHLAN_B1, true, false, elem);
        (buffers.log_density, buffers.gradient) = evaluate(buffers.position.clone());
        buffers.kick(step, 1.0 - 2.0 * MCLACHLAN_B1, true, true, elem);
        (buffers.log_density, buffers.gradient) = evaluate(buffers.position.clone());
        buffers.kick(step, MCLACHLAN_B1, false, true, elem);
    }
    let read = match read_all(vec![
        buffers.position,
        buffers.velocity,
        buffers.gradient,
        buffers.log_density,
        buffers.kinetic,
        buffers.evaluations,
        buffers.failed,
    ]) {
        Ok(read) => read,
        Err(e) => return Some(Err(e)),
    };
    let [position, velocity, gradient, log_density, kinetic, evaluations, failed] =
        read.map(as_f64);
    for (i, path) in paths.iter_mut().enumerate() {
        let row = i * d..(i + 1) * d;
        path.position.copy_from_slice(&position[row.clone()]);
        path.velocity.copy_from_slice(&velocity[row.clone()]);
        path.gradient.copy_from_slice(&gradient[row]);
        path.end_elsewhere(
            log_density[i],
            kinetic[i],
            evaluations[i] as usize,
            failed[i] > 0.0,
        );
    }
    Some(Ok(()))
}

fn upload(values: Vec<f64>, shape: Vec<usize>, dtype: DType, device: &CubeDevice) -> CubeTensor {
    let data = match dtype {
        DType::F32 => TensorData::new(values.iter().map(|&v| v as f32).collect::<Vec<_>>(), shape),
        _ => TensorData::new(values, shape).convert_dtype(dtype),
    };
    <Cube as burn::backend::ops::FloatTensorOps<Cube>>::float_from_data(data, device)
}

fn as_f64(data: TensorData) -> Vec<f64> {
    match data.as_slice::<f32>() {
        Ok(values) => values.iter().map(|&v| v as f64).collect(),
        Err(_) => data
            .convert::<f64>()
            .try_to_vec::<f64>()
            .expect("data converted to f64 reads as f64"),
    }
}

/// Reads `N` device tensors back in one transfer (one Burn transaction).
pub(crate) fn read_all<const N: usize>(
    tensors: Vec<FloatTensor<Cube>>,
) -> Result<[TensorData; N], LogDensityError> {
    let transaction = TransactionPrimitive::<Cube>::new(tensors, vec![], vec![], vec![]);
    let read = match burn::tensor::try_read_sync(<Cube as TransactionOps<Cube>>::tr_execute(
        transaction,
    )) {
        Some(Ok(read)) => read,
        Some(Err(e)) => {
            return Err(LogDensityError::fatal("reading from the device failed").with_source(e))
        }
        None => {
            return Err(LogDensityError::fatal(
                "this platform cannot wait for a device read",
            ))
        }
    };
    read.read_floats.try_into().map_err(|_| {
        LogDensityError::fatal("the device read returned fewer tensors than asked for")
    })
}

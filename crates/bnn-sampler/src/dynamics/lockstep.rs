//! The lockstep driver: many chains move together, one batched density call per round.

use crate::dynamics::{Evaluation, Integrator, PhasePoint};
use crate::log_density::{recover, LogDensity, LogDensityError};
use crate::metric::Metric;
use rayon::prelude::*;

/// Something that moves on its own between evaluations of the log density at its position and
/// asks for them one at a time: one chain's integrator step ([`Stepper`]) or its whole
/// isokinetic path (`isokinetic_path::PathStepper`). [`Lockstep`] batches the requests of many.
pub trait Walker {
    /// Starts moving: the evaluation needed at [`Walker::position`] next, `None` when done.
    fn begin(&mut self) -> Option<Evaluation>;

    /// Continues after the requested evaluation was received.
    fn resume(&mut self) -> Option<Evaluation>;

    /// Where the requested evaluation is wanted.
    fn position(&self) -> &[f64];

    /// The result of a batched evaluation of `kind` at the position: `log p` and `∇ log p` (an
    /// empty gradient for `Evaluation::Value`), or `None` when the batch call failed recoverably.
    fn receive(&mut self, kind: Evaluation, result: Option<(f64, &[f64])>);

    /// Evaluates `kind` at the position alone and in place (a batch of one walker: no copies),
    /// with the numbers a batched call gives; only a fatal failure is returned.
    fn evaluate_alone<L: LogDensity + ?Sized>(
        &mut self,
        density: &L,
        kind: Evaluation,
    ) -> Result<(), LogDensityError>;

    /// Answers `Evaluation::Auxiliary` for the walkers at `rows` (each asked for it) in one call;
    /// only a fatal failure is returned. Walkers that never ask for it keep the default, which
    /// refuses (asking is a bug).
    fn evaluate_auxiliary(walkers: &mut [Self], rows: &[usize]) -> Result<(), LogDensityError>
    where
        Self: Sized,
    {
        let _ = (walkers, rows);
        Err(LogDensityError::fatal(
            "a walker asked for an auxiliary evaluation it does not provide",
        ))
    }
}

/// One chain's part in a lockstep step: its integrator, the point it advances, its metric and its
/// signed step size (chains of one batch may differ in all of them).
pub struct Stepper<'a, I> {
    pub integrator: &'a mut I,
    pub point: &'a mut PhasePoint,
    pub metric: &'a dyn Metric,
    pub step_size: f64,
}

impl<I: Integrator> Walker for Stepper<'_, I> {
    fn begin(&mut self) -> Option<Evaluation> {
        Some(
            self.integrator
                .begin(self.point, self.metric, self.step_size),
        )
    }

    fn resume(&mut self) -> Option<Evaluation> {
        self.integrator
            .resume(self.point, self.metric, self.step_size)
    }

    fn position(&self) -> &[f64] {
        &self.point.position
    }

    /// A recoverably failed batch gives the point a NaN log density (a divergence).
    fn receive(&mut self, kind: Evaluation, result: Option<(f64, &[f64])>) {
        match result {
            Some((log_density, gradient)) => {
                self.point.log_density = log_density;
                if kind == Evaluation::ValueAndGradient {
                    self.point.gradient.copy_from_slice(gradient);
                }
            }
            None => self.point.log_density = f64::NAN,
        }
    }

    fn evaluate_alone<L: LogDensity + ?Sized>(
        &mut self,
        density: &L,
        kind: Evaluation,
    ) -> Result<(), LogDensityError> {
        self.point.evaluate_for(&*self.integrator, density, kind)
    }

    /// The integrator of the first walker that asked answers for all of them.
    fn evaluate_auxiliary(walkers: &mut [Self], rows: &[usize]) -> Result<(), LogDensityError> {
        let mut owner: Option<&I> = None;
        let mut points: Vec<&mut PhasePoint> = Vec::with_capacity(rows.len());
        let mut asked = rows.iter().peekable();
        for (i, s) in walkers.iter_mut().enumerate() {
            if asked.next_if_eq(&&i).is_some() {
                owner.get_or_insert(&*s.integrator);
                points.push(&mut *s.point);
            }
        }
        if let Some(integrator) = owner {
            if recover(integrator.evaluate_auxiliary(&mut points))?.is_none() {
                points.iter_mut().for_each(|p| p.log_density = f64::NAN);
            }
        }
        Ok(())
    }
}

/// Moves a batch of walkers, evaluating in rounds: every walker that asks for the same kind of
/// evaluation in a round is evaluated in one `[rows, D]` call, and walkers that are done leave
/// the batch. Static HMC, NUTS (integrator steps) and MCLMC and MAMS (isokinetic paths) all move
/// through here, so each chain makes exactly the moves it would make alone (given a density
/// that is deterministic per row), and a batch of one evaluates in place.
///
/// A batch evaluation that fails recoverably fails every walker in it (`Walker::receive` with
/// `None`: a divergence for each); a fatal failure stops the step and is returned.
#[derive(Clone, Debug, Default)]
pub struct Lockstep {
    positions: Vec<f64>,
    values: Vec<f64>,
    gradients: Vec<f64>,
    /// The pending request of each walker; `None` once it is done.
    requests: Vec<Option<Evaluation>>,
    rows: Vec<usize>,
    /// The row of the last batch that holds each walker's result, `None` for walkers not in it.
    slot_of: Vec<Option<usize>>,
}

/// Walkers × dimension below which a round's per-walker work (kicks, drifts, copies) stays on the
/// calling thread: a rayon dispatch costs microseconds, a few hundred small walkers less.
pub(crate) const PARALLEL_VALUES: usize = 1 << 15;

/// `f` over the pairs `(a[i], b[i])`, results in order into `out`: on rayon's threads when the
/// batch holds at least [`PARALLEL_VALUES`] values (`len × dim`), else here. A batch kernel's
/// per-chain work before and after its lockstep rounds (starts, refreshes, accept tests) goes
/// through this; each pair's arithmetic is its own, so the split changes no number.
pub(crate) fn map_pairs<A: Send, B: Send, T: Send>(
    dim: usize,
    a: &mut [A],
    b: &mut [B],
    out: &mut Vec<T>,
    f: impl Fn(&mut A, &mut B) -> T + Sync + Send,
) {
    out.clear();
    if a.len() > 1 && a.len() * dim >= PARALLEL_VALUES {
        a.par_iter_mut()
            .zip(b.par_iter_mut())
            .map(|(a, b)| f(a, b))
            .collect_into_vec(out);
    } else {
        out.extend(a.iter_mut().zip(b.iter_mut()).map(|(a, b)| f(a, b)));
    }
}

impl Lockstep {
    /// Moves every walker until it is done (one integrator step of a `Stepper`, the whole path
    /// of a `PathStepper`), or until a fatal evaluation error, which is returned.
    ///
    /// A large batch spreads each round's per-walker work over rayon's threads: at 1024 chains
    /// of 451 parameters that work (about fifteen passes over `[C, D]` f64 per step) took longer
    /// than the GPU's gradient on one thread. Each walker's arithmetic is its own, so the draws
    /// do not depend on the split.
    pub fn step<L: LogDensity + ?Sized, W: Walker + Send + Sync>(
        &mut self,
        density: &L,
        walkers: &mut [W],
    ) -> Result<(), LogDensityError> {
        if let [single] = walkers {
            // A batch of one needs no gathering: the same evaluations, in place.
            let mut request = single.begin();
            while let Some(kind) = request {
                single.evaluate_alone(density, kind)?;
                request = single.resume();
            }
            return Ok(());
        }
        let Some(dim) = walkers.first().map(|w| w.position().len()) else {
            return Ok(());
        };
        self.requests.clear();
        self.requests.resize(walkers.len(), None);
        map_pairs(
            dim,
            walkers,
            &mut self.requests,
            &mut Vec::new(),
            |w, request| {
                *request = w.begin();
            },
        );
        loop {
            let pending = |kind| self.requests.contains(&Some(kind));
            let kinds = [
                Evaluation::ValueAndGradient,
                Evaluation::Value,
                Evaluation::Auxiliary,
            ]
            .map(|kind| (kind, pending(kind)));
            if kinds.iter().all(|(_, pending)| !pending) {
                return Ok(());
            }
            for (kind, _) in kinds.into_iter().filter(|(_, pending)| *pending) {
                self.rows.clear();
                self.rows.extend(
                    self.requests
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| **r == Some(kind))
                        .map(|(i, _)| i),
                );
                self.evaluate(density, kind, walkers)?;
            }
            map_pairs(
                dim,
                walkers,
                &mut self.requests,
                &mut Vec::new(),
                |w, request| {
                    if request.is_some() {
                        *request = w.resume();
                    }
                },
            );
        }
    }

    /// Evaluates the walkers of `self.rows` (all asking for `kind`) in one call.
    fn evaluate<L: LogDensity + ?Sized, W: Walker + Send + Sync>(
        &mut self,
        density: &L,
        kind: Evaluation,
        walkers: &mut [W],
    ) -> Result<(), LogDensityError> {
        if kind == Evaluation::Auxiliary {
            return W::evaluate_auxiliary(walkers, &self.rows);
        }
        let rows = self.rows.len();
        let dim = walkers[self.rows[0]].position().len();
        let parallel = walkers.len() > 1 && walkers.len() * dim >= PARALLEL_VALUES;
        self.positions.resize(rows * dim, 0.0);
        self.values.resize(rows, 0.0);
        {
            let walkers = &*walkers;
            let gather =
                |(slot, &i): (&mut [f64], &usize)| slot.copy_from_slice(walkers[i].position());
            let slots = &mut self.positions[..rows * dim];
            if parallel {
                slots
                    .par_chunks_mut(dim)
                    .zip(self.rows.par_iter())
                    .for_each(gather);
            } else {
                slots.chunks_mut(dim).zip(self.rows.iter()).for_each(gather);
            }
        }
        let positions = &self.positions[..rows * dim];
        let values = &mut self.values[..rows];
        let with_gradient = kind == Evaluation::ValueAndGradient;
        let ok = if with_gradient {
            self.gradients.resize(rows * dim, 0.0);
            recover(density.log_density_and_gradient(
                positions,
                values,
                &mut self.gradients[..rows * dim],
            ))?
            .is_some()
        } else {
            recover(density.log_density(positions, values))?.is_some()
        };
        // Row r of the results goes to walker rows[r]: a result slot for every walker, filled
        // in row order, so the receiving pass runs over the walkers themselves.
        self.slot_of.clear();
        self.slot_of.resize(walkers.len(), None);
        for (row, &i) in self.rows.iter().enumerate() {
            self.slot_of[i] = Some(row);
        }
        let (values, gradients) = (&self.values, &self.gradients);
        map_pairs(
            dim,
            walkers,
            &mut self.slot_of,
            &mut Vec::new(),
            |w, slot| {
                if let Some(row) = *slot {
                    let gradient: &[f64] = if with_gradient {
                        &gradients[row * dim..(row + 1) * dim]
                    } else {
                        &[]
                    };
                    w.receive(kind, ok.then_some((values[row], gradient)));
                }
            },
        );
        Ok(())
    }
}

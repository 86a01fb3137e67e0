//! Training an L-HNN on trajectories of a 2-D standard normal.

mod support;

use bnn_sampler::dynamics::surrogate::SurrogateGradient;
use bnn_surrogate::{LatentHnnConfig, LhnnTrainingConfig, TrainingError, TrajectoryDataConfig};
use burn::tensor::Device;
use std::time::Instant;
use support::StandardNormal;

#[test]
fn training_learns_the_standard_normal_force() {
    let target = StandardNormal(2);
    // 4 × 400 = 1600 phase points.
    let data = TrajectoryDataConfig::new()
        .with_trajectories(4)
        .with_end_time(10.0)
        .with_seed(3)
        .generate(&target, &[1.0, -0.5])
        .unwrap();
    let network = LatentHnnConfig::new(2)
        .with_hidden_width(32)
        .with_hidden_layers(2);
    let training = LhnnTrainingConfig::new()
        .with_steps(600)
        .with_learning_rate(5e-3)
        .with_seed(4);
    let mut progress = Vec::new();
    let started = Instant::now();
    let trained = training
        .train(&network, &data, &Device::flex(), |step, loss| {
            progress.push((step, loss))
        })
        .unwrap();
    eprintln!(
        "trained 600 steps on {} points in {:.2} s: loss {:.4} -> {:.6}",
        data.len(),
        started.elapsed().as_secs_f64(),
        trained.initial_loss,
        trained.final_loss
    );
    for record in &trained.history {
        eprintln!("step {:4}: loss {:.6}", record.step, record.loss);
    }
    assert_eq!(trained.history.len(), 6);
    assert_eq!(
        progress,
        trained
            .history
            .iter()
            .map(|r| (r.step, r.loss))
            .collect::<Vec<_>>()
    );
    assert!(
        trained.final_loss < trained.initial_loss / 100.0,
        "loss fell only from {} to {}",
        trained.initial_loss,
        trained.final_loss
    );

    // The force is −∂H_θ/∂q at p = 0, a slice of phase space these 2-D trajectories cross only
    // where both momenta are small at once, so check it at the positions of the data points with
    // the smallest |p| (8 of the 160 smallest; |q| ≈ 1–2 there). Tolerance 0.1 in |force + q|:
    // the final loss ~3e-4 is an rms residual ~0.02 on the data, and moving to p = 0 (|p| up to
    // ~0.7) adds the spurious q–p coupling the network learned; the worst seen is ~0.04, while a
    // wrong sign or scale of the force would be off by ~|q| ≥ 1. (Away from the data, e.g. at
    // q = (1, 0) which no trajectory passes with small |p|, the error reaches ~0.2.)
    let surrogate = &trained.surrogate;
    let mut rows: Vec<&[f64]> = data.points.chunks_exact(4).collect();
    rows.sort_by(|a, b| (a[2].hypot(a[3])).total_cmp(&b[2].hypot(b[3])));
    let mut worst: f64 = 0.0;
    for x in rows.iter().step_by(20).take(8) {
        let q = &x[..2];
        let mut force = [0.0; 2];
        surrogate.gradient(q, &mut force).unwrap();
        let error = (force[0] + q[0]).hypot(force[1] + q[1]);
        eprintln!(
            "q = {q:?}, |p| = {:.3}: force {force:?}, error {error:.4}",
            x[2].hypot(x[3])
        );
        worst = worst.max(error);
    }
    assert!(worst < 0.1, "the learned force is off by up to {worst}");
}

#[test]
fn mismatched_or_invalid_settings_are_refused() {
    let data = TrajectoryDataConfig::new()
        .with_trajectories(1)
        .with_end_time(0.5)
        .generate(&StandardNormal(2), &[0.0, 0.0])
        .unwrap();
    let device = Device::flex();
    let training = LhnnTrainingConfig::new().with_steps(1);
    assert!(matches!(
        training.train(&LatentHnnConfig::new(3), &data, &device, |_, _| {}),
        Err(TrainingError::Dimension {
            network: 3,
            data: 2
        })
    ));
    assert!(matches!(
        training.clone().with_learning_rate(0.0).train(
            &LatentHnnConfig::new(2),
            &data,
            &device,
            |_, _| {}
        ),
        Err(TrainingError::Config(_))
    ));
}

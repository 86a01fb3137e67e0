//! Measures one `LhnnSurrogate` force evaluation at the paper's network size (d = 10, three
//! hidden layers of 100), the cost a surrogate leaf pays instead of the true gradient.
//!
//! `cargo run --release -p bnn-surrogate --example gradient_cost`

use bnn_sampler::dynamics::surrogate::SurrogateGradient;
use bnn_surrogate::{LatentHnnConfig, LhnnSurrogate};
use burn::tensor::{DType, Device};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let dim = 10;
    let network = LatentHnnConfig::new(dim)
        .with_hidden_width(100)
        .with_hidden_layers(3)
        .init(&Device::flex(), DType::F32, 0);
    let surrogate = LhnnSurrogate::from_module(&network);
    let q: Vec<f64> = (0..dim).map(|i| 0.1 * i as f64 - 0.4).collect();
    let mut force = vec![0.0; dim];
    for chains in [1, 16] {
        let positions: Vec<f64> = q.iter().copied().cycle().take(chains * dim).collect();
        let mut forces = vec![0.0; chains * dim];
        let calls = 200_000 / chains;
        for _ in 0..calls / 10 {
            surrogate
                .gradient(black_box(&positions), &mut forces)
                .unwrap();
        }
        let started = Instant::now();
        for _ in 0..calls {
            surrogate
                .gradient(black_box(&positions), &mut forces)
                .unwrap();
        }
        let per_position = started.elapsed().as_secs_f64() * 1e6 / (calls * chains) as f64;
        println!("batch of {chains:2}: {per_position:.2} µs per position");
    }
    let mut gradient = vec![0.0; 2 * dim];
    let p = vec![0.3; dim];
    let calls = 200_000;
    let started = Instant::now();
    for _ in 0..calls {
        surrogate.input_gradient(black_box(&q), black_box(&p), &mut gradient);
    }
    println!(
        "input_gradient (q, p): {:.2} µs",
        started.elapsed().as_secs_f64() * 1e6 / calls as f64
    );
    surrogate.gradient(&q, &mut force).unwrap();
    println!("force at q: {force:?}");
}

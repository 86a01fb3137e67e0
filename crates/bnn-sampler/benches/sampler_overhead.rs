//! Prints, as JSON, the sampler's own cost per leapfrog step (per gradient) for NUTS, HMC, batched
//! NUTS, MCLMC and 1024 batched LAPS chains at D = 450, then (to stderr) the LAPS ensemble's
//! tuning per burn-in step and chain.
//!
//! `cargo bench -p bnn-sampler --bench sampler_overhead [-- DIM DRAWS]`

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let dim = args.next().and_then(|a| a.parse().ok()).unwrap_or(450);
    let draws = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let measurements = bnn_sampler::measure_sampler_overhead(dim, draws, 0);
    let tuning = bnn_sampler::measure_ensemble_tuning(1024, dim, 200);
    eprintln!("LAPS burn-in tuning, 1024 chains: {tuning:.3} µs per chain and step");
    match serde_json::to_string_pretty(&measurements) {
        Ok(json) => println!("{json}"),
        Err(error) => eprintln!("could not serialize the measurements: {error}"),
    }
}

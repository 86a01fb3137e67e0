//! Prints, as JSON, the sampler's own cost per leapfrog step (per gradient) for NUTS, HMC, batched
//! NUTS and MCLMC at D = 450.
//!
//! `cargo bench -p bnn-sampler --bench sampler_overhead [-- DIM DRAWS]`

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let dim = args.next().and_then(|a| a.parse().ok()).unwrap_or(450);
    let draws = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let measurements = bnn_sampler::measure_sampler_overhead(dim, draws, 0);
    match serde_json::to_string_pretty(&measurements) {
        Ok(json) => println!("{json}"),
        Err(error) => eprintln!("could not serialize the measurements: {error}"),
    }
}

//! A checkpointed chain keeps the JSON layout it had before tuners and carries were seams, so
//! run directories written earlier resume and new ones are byte-identical for the same run.

use bnn_sampler::{
    for_each_row, ChainStart, ChainState, LogDensity, LogDensityError, NutsConfig, SamplerConfig,
};

struct Normal;

impl LogDensity for Normal {
    fn dim(&self) -> usize {
        2
    }
    fn log_density_and_gradient(
        &self,
        q: &[f64],
        v: &mut [f64],
        g: &mut [f64],
    ) -> Result<(), LogDensityError> {
        for_each_row(2, q, v, g, |q, g| {
            g.iter_mut().zip(q).for_each(|(g, x)| *g = -x);
            Ok(-0.5 * q.iter().map(|x| x * x).sum::<f64>())
        })
    }
}

fn keys(value: &serde_json::Value) -> Vec<String> {
    value
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect()
}

#[test]
fn chain_state_json_has_the_same_keys_in_the_same_order() {
    let sampler = SamplerConfig::new(NutsConfig::new().into())
        .with_num_warmup(20)
        .with_num_draws(5)
        .init()
        .unwrap();
    let chains = sampler
        .init_chains(&Normal, &[ChainStart::at(vec![0.5, -0.2])])
        .unwrap();
    let text = serde_json::to_string(&chains[0]).unwrap();
    // `serde_json` without `preserve_order` sorts keys; read the order off the text instead.
    let order: Vec<usize> = [
        "\"chain\"",
        "\"iteration\"",
        "\"kernel\"",
        "\"step_size\"",
        "\"metric\"",
        "\"warmup\"",
        "\"rng\"",
    ]
    .iter()
    .map(|k| {
        text.find(k)
            .unwrap_or_else(|| panic!("{k} missing in {text}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut kernel = keys(&value["kernel"]);
    kernel.sort();
    assert_eq!(
        kernel,
        ["gradient", "log_density", "momentum", "position"],
        "position, log density, gradient and momentum: nothing else"
    );
    assert!(value.get("trajectory_length").is_none());
    assert!(
        value["warmup"].get("schedule").is_some(),
        "the Stan tuner's state, untagged"
    );
    let back: ChainState = serde_json::from_str(&text).unwrap();
    assert_eq!(back, chains[0]);
    assert_eq!(serde_json::to_string(&back).unwrap(), text);
}

//! What a timing was measured on: the CPU's name, its vector instruction sets and the cores.

/// `AMD EPYC (avx2, fma; no avx512f), 2 cores`, from `/proc/cpuinfo` where it exists.
pub fn describe_cpu() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let model = field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let flags = field("flags").unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    let sets: Vec<&str> = ["avx512f", "avx2", "fma"]
        .into_iter()
        .filter(|f| has(f))
        .collect();
    let sets = if flags.is_empty() {
        String::new()
    } else if has("avx512f") {
        format!(" ({})", sets.join(", "))
    } else {
        format!(" ({}; no avx512f)", sets.join(", "))
    };
    format!("{model}{sets}, {cores} cores")
}

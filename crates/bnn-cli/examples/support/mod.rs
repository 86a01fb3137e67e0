//! What the comparison examples share: the `bnn` binary beside them, and the start of `main`.

use std::path::{Path, PathBuf};

/// The `bnn` binary of the same build profile (`target/<profile>/examples/X` → `target/<profile>/bnn`).
pub fn bnn_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the example's path");
    exe.parent()
        .and_then(Path::parent)
        .map(|p| p.join("bnn"))
        .unwrap_or_else(|| PathBuf::from("bnn"))
}

/// The parsed options and the `bnn` binary, or a one-line error and exit status 2.
pub fn options_and_binary<O>(parsed: Result<O, String>) -> (O, PathBuf) {
    let options = parsed.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2);
    });
    let bnn = bnn_binary();
    if !bnn.is_file() {
        eprintln!(
            "error: {} not found; run `cargo build --release -p bnn-cli` first",
            bnn.display()
        );
        std::process::exit(2);
    }
    (options, bnn)
}

#!/usr/bin/env bash
# Checks that this example compiles as a crate outside the workspace that depends on the
# burn-bnn facade alone (a path dependency, as a user's project would before publishing).
# `cargo check` only: the dependencies' metadata is shared with the workspace's target dir.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
outside="$(mktemp -d)"
trap 'rm -rf "$outside"' EXIT
mkdir -p "$outside/src"
cp "$here/src/main.rs" "$outside/src/main.rs"
cp "$root/Cargo.lock" "$outside/Cargo.lock"
cat > "$outside/Cargo.toml" <<TOML
[package]
name = "your-module-outside"
version = "0.1.0"
edition = "2021"

[dependencies]
burn-bnn = { path = "$root/crates/burn-bnn" }

[workspace]
TOML
cargo check --manifest-path "$outside/Cargo.toml"
echo "your-module compiles outside the workspace against burn-bnn alone"

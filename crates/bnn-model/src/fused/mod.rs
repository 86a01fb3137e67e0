//! The fused operation: the built-in MLP's log density and its handwritten gradient as one Burn
//! operation (`fused_mlp`), and the three bodies it runs on: the host kernel of `bnn-kernels`
//! on CPU backends, a program of batched tensor operations on any backend (`ops_gradient`), and
//! CubeCL kernels on GPU runtimes (`cube_kernels` for its elementwise runs, `cube_network` for
//! the whole network in one launch). `terms` says which parts of the density a call returns.

pub(crate) mod cube_kernels;
pub(crate) mod cube_network;
pub(crate) mod cube_paths;
pub mod fused_mlp;
pub(crate) mod ops_gradient;
pub(crate) mod terms;

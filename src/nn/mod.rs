//! Neural-network building blocks on top of [`Tensor`](crate::Tensor): `state` (safetensors files and state
//! dicts) and `datasets` (MNIST). Follows tinygrad `nn/`.

pub mod datasets;
pub mod state;

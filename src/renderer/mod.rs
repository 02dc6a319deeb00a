//! Rendering. In: a linearized kernel. Out: source text for a device's compiler. One file per language:
//! `cstyle` (C for the CPU). Follows tinygrad `renderer/`.

pub mod cstyle;

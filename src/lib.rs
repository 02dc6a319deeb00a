//! tinygrad-rs: tinygrad's design in Rust. A lazy tensor library whose one IR ([`uop::UOp`]) is rewritten by
//! pattern matchers, cut into kernels, rendered to source, compiled at run time and launched.
//!
//! Stages, in processing order: [`dtype`] and [`helpers`] (shared), [`uop`] (the IR, pattern matching and
//! symbolic algebra). Later stages (tensor, schedule, codegen, renderer, runtime, engine, nn) build on these.

pub mod dtype;
pub mod helpers;
pub mod uop;

pub use dtype::{dtypes, DType};
pub use uop::{Ops, UOp};

//! tinygrad-rs: tinygrad's design in Rust. A lazy tensor library whose one IR ([`uop::UOp`]) is rewritten by
//! pattern matchers, cut into kernels, rendered to source, compiled at run time and launched.
//!
//! Stages, in processing order: [`tensor`] (the user API) builds [`uop`] graphs; [`schedule`] cuts them into
//! kernels; [`codegen`] lowers and linearizes each; [`renderer`] prints source; [`runtime`] compiles and
//! launches it; [`engine`] drives the whole. [`dtype`], [`helpers`] and [`error`] are shared by all. Above the
//! tensor: [`nn`] (layers, optimizers, state, GGUF), [`onnx`] (ONNX models) and [`llm`]. Beside the pipeline:
//! [`profile`] (the profiler's events) and [`viz`] (the trace of every rewrite, kernel and launch, and its viewer).

// lets `#[derive(Module)]`'s `::tinygrad::...` paths resolve inside this crate too
extern crate self as tinygrad;

pub mod codegen;
pub mod dtype;
pub mod engine;
pub mod error;
pub mod helpers;
pub mod llm;
pub mod nn;
pub mod onnx;
pub mod profile;
pub mod renderer;
pub mod runtime;
pub mod schedule;
pub mod tensor;
pub mod uop;
pub mod viz;

pub use dtype::{dtypes, DType};
pub use error::{Error, Result};
pub use tensor::Tensor;
pub use tensor::TinyJit;
pub use uop::{Ops, Sint, UOp};

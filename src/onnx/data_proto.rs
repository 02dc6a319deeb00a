//! The value messages of onnx 1.23.2's `onnx-data.proto` that test data and `.pb` files use beside `TensorProto`:
//! `SequenceProto` and `OptionalProto`, declared for prost as its code generator writes them (field numbers and types
//! as in the `.proto`; maps are not read).

use super::proto::TensorProto;

/// A sequence of values of one type (onnx `SequenceProto`).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SequenceProto {
    #[prost(string, optional, tag = "1")]
    pub name: ::core::option::Option<::prost::alloc::string::String>,
    /// What the elements are: 1 tensors, 3 sequences, 5 optionals (`SequenceProto.DataType`).
    #[prost(int32, optional, tag = "2")]
    pub elem_type: ::core::option::Option<i32>,
    #[prost(message, repeated, tag = "3")]
    pub tensor_values: ::prost::alloc::vec::Vec<TensorProto>,
    #[prost(message, repeated, tag = "5")]
    pub sequence_values: ::prost::alloc::vec::Vec<SequenceProto>,
    #[prost(message, repeated, tag = "7")]
    pub optional_values: ::prost::alloc::vec::Vec<OptionalProto>,
}

/// A value that may be absent (onnx `OptionalProto`).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct OptionalProto {
    #[prost(string, optional, tag = "1")]
    pub name: ::core::option::Option<::prost::alloc::string::String>,
    /// What the value is: 0 none, 1 a tensor, 3 a sequence, 5 an optional (`OptionalProto.DataType`).
    #[prost(int32, optional, tag = "2")]
    pub elem_type: ::core::option::Option<i32>,
    #[prost(message, optional, tag = "3")]
    pub tensor_value: ::core::option::Option<TensorProto>,
    #[prost(message, optional, boxed, tag = "5")]
    pub sequence_value: ::core::option::Option<::prost::alloc::boxed::Box<SequenceProto>>,
    #[prost(message, optional, boxed, tag = "7")]
    pub optional_value: ::core::option::Option<::prost::alloc::boxed::Box<OptionalProto>>,
}

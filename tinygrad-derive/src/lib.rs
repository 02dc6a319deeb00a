//! `#[derive(Module)]`: implements `tinygrad::nn::Module` for a struct by visiting each named field in order,
//! under the field's name (`l1.weight`, `layers.0.bias`), so state dicts and parameter lists need no
//! hand-written lists (tinygrad `nn.state.get_state_dict`, which walks `__dict__`). `#[module(skip)]` leaves a
//! field out.

use proc_macro::TokenStream;
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields};

/// Derives `Module` for a struct with named fields, each of which implements `Module` (tensors, layers,
/// `Vec`s and `Option`s of them, and plain numbers, which hold no tensors) unless marked `#[module(skip)]`.
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    let name = &input.ident;
    let (imp, ty, wh) = input.generics.split_for_impl();
    let Data::Struct(data) = &input.data else {
        return syn::Error::new_spanned(&input, "#[derive(Module)] needs a struct").to_compile_error().into();
    };
    let Fields::Named(fields) = &data.fields else {
        return syn::Error::new_spanned(&input, "#[derive(Module)] needs named fields").to_compile_error().into();
    };
    let skip =
        |f: &syn::Field| f.attrs.iter().any(|a| a.path().is_ident("module") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "skip"));
    let visits = fields.named.iter().filter(|f| !skip(f)).map(|f| {
        let id = f.ident.as_ref().unwrap();
        let key = id.to_string();
        quote! { ::tinygrad::nn::Module::visit(&self.#id, &::tinygrad::nn::join_name(prefix, #key), f); }
    });
    quote! {
        impl #imp ::tinygrad::nn::Module for #name #ty #wh {
            fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &::tinygrad::Tensor)) {
                #(#visits)*
            }
        }
    }
    .into()
}

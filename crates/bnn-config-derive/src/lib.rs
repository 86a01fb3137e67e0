//! `#[derive(Config)]` for configurations in crates that must not depend on Burn (the sampler):
//! the code Burn's own `Config` derive writes, without the `burn::config::Config` trait impl.
//!
//! A struct gets `new(required fields...)`, a `with_<field>` builder for every field with a
//! `#[config(default = ...)]` and every `Option` field (default `None`), `Clone`, `Display`
//! (pretty JSON) and `Serialize`/`Deserialize` through a plain mirror struct whose fields come
//! in Burn's order: required, then `Option`, then defaulted. That order is the order of the
//! serialized keys, so a configuration written by a Burn-derived version reads back, and is
//! written, the same. Unlike Burn's, a defaulted field missing from the text takes its default,
//! so a configuration written before the field existed still loads. An enum gets `Clone`, `Display` and serde's externally tagged form.
//! `Debug` is derived separately, as with Burn. The generated code names `::serde` and
//! `::serde_json`: the deriving crate depends on both.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::quote;
use syn::{parse_macro_input, Attribute, Data, DeriveInput, Field, Fields, Ident, Lit};

#[proc_macro_derive(Config, attributes(config))]
pub fn derive_config(input: TokenStream) -> TokenStream {
    let item = parse_macro_input!(input as DeriveInput);
    let generated = match &item.data {
        Data::Struct(data) => derive_struct(&item.ident, &data.fields),
        Data::Enum(data) => Ok(derive_enum(&item.ident, data)),
        Data::Union(_) => Err(syn::Error::new_spanned(
            &item.ident,
            "Config is derived for structs and enums",
        )),
    };
    generated
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// A field with `#[config(default = value)]`: its default expression (a string literal holds
/// the expression's source, any other literal is the value itself).
fn default_of(field: &Field) -> syn::Result<Option<(Tokens, String)>> {
    let mut default = None;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("config")) {
        attr.parse_nested_meta(|meta| {
            if !meta.path.is_ident("default") {
                return Err(meta.error("expected `default = <literal>`"));
            }
            let lit: Lit = meta.value()?.parse()?;
            let shown = quote!(#lit).to_string();
            let value = match &lit {
                Lit::Str(source) => source.parse::<syn::Expr>().map(|e| quote!(#e))?,
                other => quote!(#other),
            };
            default = Some((value, shown));
            Ok(())
        })?;
    }
    Ok(default)
}

/// Burn's test for an optional field: the type's path is exactly `Option<..>`.
fn is_option(field: &Field) -> bool {
    match &field.ty {
        syn::Type::Path(path) => {
            path.qself.is_none()
                && path.path.leading_colon.is_none()
                && path.path.segments.len() == 1
                && path.path.segments[0].ident == "Option"
        }
        _ => false,
    }
}

fn docs(field: &Field) -> Vec<&Attribute> {
    field
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect()
}

fn derive_struct(name: &Ident, fields: &Fields) -> syn::Result<Tokens> {
    let Fields::Named(fields) = fields else {
        return Err(syn::Error::new_spanned(
            name,
            "Config is derived for structs with named fields",
        ));
    };
    let mut required = Vec::new();
    let mut optional = Vec::new();
    let mut defaulted = Vec::new();
    for field in &fields.named {
        match default_of(field)? {
            Some(default) => defaulted.push((field, default)),
            None if is_option(field) => optional.push(field),
            None => required.push(field),
        }
    }
    // Burn's order (the serialized key order): required, optional, defaulted.
    let ordered: Vec<&Field> = required
        .iter()
        .copied()
        .chain(optional.iter().copied())
        .chain(defaulted.iter().map(|(f, _)| *f))
        .collect();
    let ident = |f: &Field| f.ident.clone().expect("named field");
    let names: Vec<Ident> = ordered.iter().map(|f| ident(f)).collect();
    let types: Vec<&syn::Type> = ordered.iter().map(|f| &f.ty).collect();

    let args = required.iter().map(|f| {
        let (n, t) = (ident(f), &f.ty);
        quote!(#n: #t)
    });
    let required_init = required.iter().map(|f| ident(f));
    let optional_init = optional.iter().map(|f| ident(f));
    let defaulted_init = defaulted.iter().map(|(f, (value, _))| {
        let n = ident(f);
        quote!(#n: #value)
    });

    let builder = |field: &Field, default: &str| {
        let (n, t) = (ident(field), &field.ty);
        let setter = Ident::new(&format!("with_{n}"), n.span());
        let summary = format!("Sets [`{n}`](Self::{n}).\n\n");
        let default = format!("- Defaults to `{default}`");
        let field_docs = docs(field);
        quote! {
            #[doc = #summary]
            #(#field_docs)*
            #[doc = #default]
            pub fn #setter(mut self, #n: #t) -> Self {
                self.#n = #n;
                self
            }
        }
    };
    let builders = defaulted
        .iter()
        .map(|(f, (_, shown))| builder(f, shown))
        .chain(optional.iter().map(|f| builder(f, "None")));

    // A defaulted field missing from the text takes its default (a file written before the
    // field existed still loads); a required one is an error, as with Burn.
    let default_fn = |f: &Field| Ident::new(&format!("__default_{}", ident(f)), Span::call_site());
    let default_fns = defaulted.iter().map(|(f, (value, _))| {
        let (function, t) = (default_fn(f), &f.ty);
        quote!(fn #function() -> #t { #value })
    });
    let de_attrs: Vec<Tokens> = ordered
        .iter()
        .map(
            |f| match defaulted.iter().find(|(d, _)| std::ptr::eq(*d, *f)) {
                Some(_) => {
                    let path = default_fn(f).to_string();
                    quote!(#[serde(default = #path)])
                }
                None => quote!(),
            },
        )
        .collect();
    let mirror = Ident::new(&format!("{name}Serde"), Span::call_site());
    Ok(quote! {
        impl #name {
            /// Creates the configuration from its required fields; every other field takes its
            /// default.
            #[allow(clippy::too_many_arguments)]
            pub fn new(#(#args),*) -> Self {
                Self {
                    #(#required_init,)*
                    #(#optional_init: None,)*
                    #(#defaulted_init,)*
                }
            }
            #(#builders)*
        }

        impl ::serde::Serialize for #name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                #[derive(::serde::Serialize)]
                struct #mirror<'a> {
                    #(#names: &'a #types),*
                }
                ::serde::Serialize::serialize(&#mirror { #(#names: &self.#names),* }, serializer)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for #name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                #(#default_fns)*
                #[derive(::serde::Deserialize)]
                struct #mirror {
                    #(#de_attrs #names: #types),*
                }
                let mirror = <#mirror as ::serde::Deserialize>::deserialize(deserializer)?;
                Ok(Self { #(#names: mirror.#names),* })
            }
        }

        impl Clone for #name {
            fn clone(&self) -> Self {
                Self { #(#names: self.#names.clone()),* }
            }
        }

        impl ::core::fmt::Display for #name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(&::serde_json::to_string_pretty(self).map_err(|_| ::core::fmt::Error)?)
            }
        }
    })
}

fn derive_enum(name: &Ident, data: &syn::DataEnum) -> Tokens {
    let mirror = Ident::new(&format!("{name}Serde"), Span::call_site());
    let variants = &data.variants;
    // `Self::V { a, b }` or `Self::V(arg_0, arg_1)` as a pattern, and the same names as values.
    let bindings = |fields: &Fields| -> Tokens {
        match fields {
            Fields::Named(named) => {
                let n = named.named.iter().map(|f| f.ident.clone());
                quote!({ #(#n),* })
            }
            Fields::Unnamed(unnamed) => {
                let n = (0..unnamed.unnamed.len())
                    .map(|i| Ident::new(&format!("arg_{i}"), Span::call_site()));
                quote!(( #(#n),* ))
            }
            Fields::Unit => quote!(),
        }
    };
    let cloned = |fields: &Fields| -> Tokens {
        match fields {
            Fields::Named(named) => {
                let n = named.named.iter().map(|f| f.ident.clone());
                let m = n.clone();
                quote!({ #(#n: #m.clone()),* })
            }
            Fields::Unnamed(unnamed) => {
                let n = (0..unnamed.unnamed.len())
                    .map(|i| Ident::new(&format!("arg_{i}"), Span::call_site()));
                quote!(( #(#n.clone()),* ))
            }
            Fields::Unit => quote!(),
        }
    };
    let moved = |fields: &Fields| -> Tokens { bindings(fields) };
    let arms = |from: Tokens, to: Tokens, value: &dyn Fn(&Fields) -> Tokens| -> Vec<Tokens> {
        variants
            .iter()
            .map(|v| {
                let (vn, pattern, built) = (&v.ident, bindings(&v.fields), value(&v.fields));
                quote!(#from::#vn #pattern => #to::#vn #built)
            })
            .collect()
    };
    let to_mirror = arms(quote!(Self), quote!(#mirror), &cloned);
    let from_mirror = arms(quote!(#mirror), quote!(Self), &moved);
    let clone = arms(quote!(Self), quote!(Self), &cloned);
    quote! {
        #[derive(::serde::Serialize, ::serde::Deserialize)]
        enum #mirror {
            #variants
        }

        impl ::serde::Serialize for #name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mirror = match self {
                    #(#to_mirror),*
                };
                ::serde::Serialize::serialize(&mirror, serializer)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for #name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                Ok(match <#mirror as ::serde::Deserialize>::deserialize(deserializer)? {
                    #(#from_mirror),*
                })
            }
        }

        impl Clone for #name {
            fn clone(&self) -> Self {
                match self {
                    #(#clone),*
                }
            }
        }

        impl ::core::fmt::Display for #name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(&::serde_json::to_string_pretty(self).map_err(|_| ::core::fmt::Error)?)
            }
        }
    }
}

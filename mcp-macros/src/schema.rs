//! JSON Schema → Rust types for generated tool methods.
//!
//! Objects with `properties` become structs (required → plain, optional → `Option`),
//! string enums become enums, arrays become `Vec`s, and what does not map cleanly
//! (`$ref`, `oneOf`, mixed types, …) falls back to `serde_json::Value` rather than
//! failing.
//!
//! A type is written only one way: arguments (and what they contain) are serialized,
//! outputs deserialized. Their serde impls are written out here, small, and call
//! shared generic helpers (`__private::object`, `required`, `optional`) instead of
//! deriving: a serde derive per type was most of the compile time of a crate
//! declaring a large snapshot (docs/performance.md).

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use serde_json::Value;
use syn::Ident;

/// Which way a generated type goes over the wire.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sent: the type serializes.
    Args,
    /// Received: the type deserializes.
    Output,
}

pub struct Gen {
    pub items: Vec<TokenStream>,
    pub krate: TokenStream,
    used: Vec<String>,
}

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

/// `snake_case` of any name (`get-sum` → `get_sum`, `listIssues` → `list_issues`).
pub fn snake(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        } else {
            if !out.is_empty() && !out.ends_with('_') {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    let out = out.trim_matches('_').to_owned();
    if out.is_empty() {
        "field".to_owned()
    } else if out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{out}")
    } else {
        out
    }
}

/// `PascalCase` of any name.
pub fn pascal(name: &str) -> String {
    let s: String = snake(name)
        .split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("T{s}")
    } else {
        s
    }
}

/// An identifier for `name`, raw when it is a keyword.
pub fn ident(name: &str) -> Ident {
    if KEYWORDS.contains(&name) {
        if matches!(name, "self" | "Self" | "crate" | "super") {
            format_ident!("{name}_")
        } else {
            Ident::new_raw(name, Span::call_site())
        }
    } else {
        Ident::new(name, Span::call_site())
    }
}

fn doc(text: Option<&str>) -> TokenStream {
    match text {
        Some(t) if !t.trim().is_empty() => {
            let lines = t.lines().map(|l| format!(" {l}"));
            quote! { #( #[doc = #lines] )* }
        }
        _ => quote! {},
    }
}

impl Gen {
    pub fn new(krate: TokenStream) -> Self {
        Gen {
            items: Vec::new(),
            krate,
            used: Vec::new(),
        }
    }

    fn unique(&mut self, name: String) -> String {
        let mut n = name.clone();
        let mut i = 2;
        while self.used.contains(&n) {
            n = format!("{name}{i}");
            i += 1;
        }
        self.used.push(n.clone());
        n
    }

    /// A struct for an object schema, leaving out `skip` properties. Returns its name.
    pub fn object(
        &mut self,
        name: &str,
        schema: &Value,
        description: Option<&str>,
        skip: &[String],
        role: Role,
    ) -> Ident {
        let name = self.unique(pascal(name));
        let ty = format_ident!("{}", name);
        let krate = self.krate.clone();
        let empty = serde_json::Map::new();
        let props = schema
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields = Vec::new();
        // What the serde impl does per field: write it (arguments) or read it (outputs).
        let mut wire = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for (prop, sub) in props {
            if skip.iter().any(|s| s == prop) {
                continue;
            }
            let mut fname = snake(prop);
            while names.contains(&fname) {
                fname.push('_');
            }
            names.push(fname.clone());
            let fid = ident(&fname);
            let inner = self.ty(&format!("{name}_{prop}"), sub, role);
            let d = doc(sub.get("description").and_then(Value::as_str));
            let is_required = required.contains(&prop.as_str());
            if is_required {
                fields.push(quote! { #d pub #fid: #inner, });
            } else {
                fields.push(quote! { #d pub #fid: ::core::option::Option<#inner>, });
            }
            wire.push(match (role, is_required) {
                (Role::Args, true) => quote! {
                    #krate::__private::serde::ser::SerializeMap::serialize_entry(&mut __m, #prop, &self.#fid)?;
                },
                (Role::Args, false) => quote! {
                    if let ::core::option::Option::Some(__v) = &self.#fid {
                        #krate::__private::serde::ser::SerializeMap::serialize_entry(&mut __m, #prop, __v)?;
                    }
                },
                (Role::Output, true) => quote! { #fid: #krate::__private::required(&mut __m, #prop)?, },
                (Role::Output, false) => quote! { #fid: #krate::__private::optional(&mut __m, #prop)?, },
            });
        }
        let d = doc(description);
        let serde = match role {
            Role::Args => quote! {
                impl #krate::__private::serde::Serialize for #ty {
                    fn serialize<__S: #krate::__private::serde::Serializer>(&self, __s: __S) -> ::core::result::Result<__S::Ok, __S::Error> {
                        let mut __m = #krate::__private::serde::Serializer::serialize_map(__s, ::core::option::Option::None)?;
                        #(#wire)*
                        #krate::__private::serde::ser::SerializeMap::end(__m)
                    }
                }
            },
            Role::Output => quote! {
                impl<'de> #krate::__private::serde::Deserialize<'de> for #ty {
                    fn deserialize<__D: #krate::__private::serde::Deserializer<'de>>(__d: __D) -> ::core::result::Result<Self, __D::Error> {
                        let mut __m = #krate::__private::object(__d)?;
                        let _ = &mut __m;
                        ::core::result::Result::Ok(#ty { #(#wire)* })
                    }
                }
            },
        };
        self.items.push(quote! {
            #d
            #[derive(::core::fmt::Debug, ::core::clone::Clone, ::core::default::Default, ::core::cmp::PartialEq)]
            pub struct #ty { #(#fields)* }
            #serde
        });
        ty
    }

    fn ty(&mut self, hint: &str, schema: &Value, role: Role) -> TokenStream {
        let krate = self.krate.clone();
        let value = quote! { #krate::__private::serde_json::Value };
        let Some(kind) = schema.get("type").and_then(Value::as_str) else {
            return value;
        };
        if schema.get("$ref").is_some()
            || schema.get("oneOf").is_some()
            || schema.get("anyOf").is_some()
        {
            return value;
        }
        match kind {
            "string" => match schema.get("enum").and_then(Value::as_array) {
                Some(values) => self
                    .string_enum(hint, values, role)
                    .unwrap_or_else(|| quote! { ::std::string::String }),
                None => quote! { ::std::string::String },
            },
            "integer" => quote! { i64 },
            "number" => quote! { f64 },
            "boolean" => quote! { bool },
            "array" => {
                let item = match schema.get("items") {
                    Some(i) if i.is_object() => self.ty(&format!("{hint}_item"), i, role),
                    _ => value,
                };
                quote! { ::std::vec::Vec<#item> }
            }
            "object" => {
                if schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| !p.is_empty())
                {
                    let id = self.object(
                        hint,
                        schema,
                        schema.get("description").and_then(Value::as_str),
                        &[],
                        role,
                    );
                    quote! { #id }
                } else {
                    quote! { #krate::__private::serde_json::Map<::std::string::String, #value> }
                }
            }
            _ => value,
        }
    }

    fn string_enum(&mut self, hint: &str, values: &[Value], role: Role) -> Option<TokenStream> {
        let strings: Vec<&str> = values.iter().map(Value::as_str).collect::<Option<_>>()?;
        let mut variants: Vec<String> = Vec::new();
        for s in &strings {
            let v = pascal(s);
            if variants.contains(&v) {
                return None;
            }
            variants.push(v);
        }
        let name = self.unique(pascal(hint));
        let ty = format_ident!("{}", name);
        let krate = &self.krate;
        let ids: Vec<Ident> = variants.iter().map(|v| format_ident!("{}", v)).collect();
        let decl = ids.iter().enumerate().map(|(i, id)| {
            if i == 0 {
                quote! { #[default] #id, }
            } else {
                quote! { #id, }
            }
        });
        let serde = match role {
            Role::Args => quote! {
                impl #krate::__private::serde::Serialize for #ty {
                    fn serialize<__S: #krate::__private::serde::Serializer>(&self, __s: __S) -> ::core::result::Result<__S::Ok, __S::Error> {
                        __s.serialize_str(match self { #( #ty::#ids => #strings, )* })
                    }
                }
            },
            Role::Output => quote! {
                impl<'de> #krate::__private::serde::Deserialize<'de> for #ty {
                    fn deserialize<__D: #krate::__private::serde::Deserializer<'de>>(__d: __D) -> ::core::result::Result<Self, __D::Error> {
                        let __v = #krate::__private::variant(__d)?;
                        match __v.as_str() {
                            #( #strings => ::core::result::Result::Ok(#ty::#ids), )*
                            __other => ::core::result::Result::Err(
                                <__D::Error as #krate::__private::serde::de::Error>::unknown_variant(__other, &[#(#strings),*]),
                            ),
                        }
                    }
                }
            },
        };
        self.items.push(quote! {
            #[derive(::core::fmt::Debug, ::core::clone::Clone, ::core::marker::Copy, ::core::default::Default,
                     ::core::cmp::PartialEq, ::core::cmp::Eq)]
            pub enum #ty { #(#decl)* }
            #serde
        });
        Some(quote! { #ty })
    }
}

//! JSON Schema → Rust types for generated tool methods.
//!
//! Objects with `properties` become structs (required → plain, optional → `Option`),
//! string enums become enums, arrays become `Vec`s, and what does not map cleanly
//! (`$ref`, `oneOf`, mixed types, …) falls back to `serde_json::Value` rather than
//! failing.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use serde_json::Value;
use syn::Ident;

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
    ) -> Ident {
        let name = self.unique(pascal(name));
        let ty = format_ident!("{}", name);
        let krate = self.krate.clone();
        let serde_path = format!("{}::__private::serde", krate.to_string().replace(' ', ""));
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
            let inner = self.ty(&format!("{name}_{prop}"), sub);
            let d = doc(sub.get("description").and_then(Value::as_str));
            let rename = if fname != *prop || KEYWORDS.contains(&fname.as_str()) {
                quote! { #[serde(rename = #prop)] }
            } else {
                quote! {}
            };
            if required.contains(&prop.as_str()) {
                fields.push(quote! { #d #rename pub #fid: #inner, });
            } else {
                fields.push(quote! {
                    #d #rename
                    #[serde(default, skip_serializing_if = "::core::option::Option::is_none")]
                    pub #fid: ::core::option::Option<#inner>,
                });
            }
        }
        let d = doc(description);
        self.items.push(quote! {
            #d
            #[derive(::core::fmt::Debug, ::core::clone::Clone, ::core::default::Default, ::core::cmp::PartialEq,
                     #krate::__private::serde::Serialize, #krate::__private::serde::Deserialize)]
            #[serde(crate = #serde_path)]
            pub struct #ty { #(#fields)* }
        });
        ty
    }

    fn ty(&mut self, hint: &str, schema: &Value) -> TokenStream {
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
                    .string_enum(hint, values)
                    .unwrap_or_else(|| quote! { ::std::string::String }),
                None => quote! { ::std::string::String },
            },
            "integer" => quote! { i64 },
            "number" => quote! { f64 },
            "boolean" => quote! { bool },
            "array" => {
                let item = match schema.get("items") {
                    Some(i) if i.is_object() => self.ty(&format!("{hint}_item"), i),
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
                    );
                    quote! { #id }
                } else {
                    quote! { #krate::__private::serde_json::Map<::std::string::String, #value> }
                }
            }
            _ => value,
        }
    }

    fn string_enum(&mut self, hint: &str, values: &[Value]) -> Option<TokenStream> {
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
        let serde_path = format!("{}::__private::serde", krate.to_string().replace(' ', ""));
        let vs = variants
            .iter()
            .zip(&strings)
            .enumerate()
            .map(|(i, (v, s))| {
                let id = format_ident!("{}", v);
                let default = if i == 0 {
                    quote! { #[default] }
                } else {
                    quote! {}
                };
                quote! { #default #[serde(rename = #s)] #id, }
            });
        self.items.push(quote! {
            #[derive(::core::fmt::Debug, ::core::clone::Clone, ::core::marker::Copy, ::core::default::Default,
                     ::core::cmp::PartialEq, ::core::cmp::Eq,
                     #krate::__private::serde::Serialize, #krate::__private::serde::Deserialize)]
            #[serde(crate = #serde_path)]
            pub enum #ty { #(#vs)* }
        });
        Some(quote! { #ty })
    }
}

//! The typed per-tool methods a declaration gets from its snapshot, and the module of
//! their argument and output types.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use serde_json::Value;

use crate::check::{self, Planned};
use crate::schema::{ident, snake, Gen, Role};

/// The methods (one per planned tool, each name once) and the types module
/// (`<struct>_tools`, empty when no tool needs a type).
pub(super) fn typed_methods(
    planned: &[Planned],
    krate: &TokenStream,
    ty: &syn::Ident,
    vis: &syn::Visibility,
) -> (Vec<TokenStream>, TokenStream) {
    let mut gen = Gen::new(krate.clone());
    let module = format_ident!("{}_tools", snake(&ty.to_string()));
    let mut methods = Vec::new();
    let mut emitted: Vec<&str> = Vec::new();
    for p in planned {
        // Two tools on one method name, or a tool on a method the declaration itself
        // has, is reported by the check; emit one of them, or none.
        if emitted.contains(&p.method.as_str()) || check::GENERATED.contains(&p.method.as_str()) {
            continue;
        }
        emitted.push(&p.method);
        let method = ident(&p.method);
        let server_name = &p.server_name;
        let position = p.position;
        let description = p.tool.get("description").and_then(Value::as_str);
        let doc = description
            .map(|t| t.lines().map(|l| format!(" {l}")).collect::<Vec<_>>())
            .unwrap_or_else(|| vec![format!(" Calls the `{}` tool.", p.server_name)]);
        let empty = serde_json::json!({"type": "object"});
        let schema = p.tool.get("inputSchema").unwrap_or(&empty);
        let has_args = schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|props| props.keys().any(|k| !p.fixed.contains(k)));
        let output = p.tool.get("outputSchema").filter(|o| {
            o.get("type").and_then(Value::as_str) == Some("object")
                && o.get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|m| !m.is_empty())
        });
        let out_ty = output.map(|o| {
            let id = gen.object(
                &format!("{}_output", p.method),
                o,
                Some("The tool's structured output."),
                &[],
                Role::Output,
            );
            quote! { #module::#id }
        });
        let span = p.span;
        // Not `async fn`s: each method hands the shared call path its serialized
        // arguments, so no per-tool state machine is compiled.
        let (param, args) = if has_args {
            let id = gen.object(&p.method, schema, description, &p.fixed, Role::Args);
            (
                quote! { , arguments: #module::#id },
                quote! { #krate::__private::declared_arguments(#server_name, &arguments) },
            )
        } else {
            (
                quote! {},
                quote! { ::core::result::Result::Ok(#krate::__private::serde_json::Value::Object(#krate::__private::serde_json::Map::new())) },
            )
        };
        let future = |out: TokenStream| {
            quote! { impl ::core::future::Future<Output = #krate::Result<#out>> + '_ }
        };
        methods.push(match out_ty {
            Some(out) => {
                let ret = future(quote! { #krate::Typed<#out> });
                quote_spanned! { span=>
                    #( #[doc = #doc] )*
                    pub fn #method(&self #param) -> #ret {
                        self.__mcp_inner.__mcp.call_declared_typed::<#out>(#position, #server_name, #args)
                    }
                }
            }
            None => {
                let ret = future(quote! { #krate::CallToolResult });
                quote_spanned! { span=>
                    #( #[doc = #doc] )*
                    pub fn #method(&self #param) -> #ret {
                        self.__mcp_inner.__mcp.call_declared(#position, #server_name, #args)
                    }
                }
            }
        });
    }
    let types = &gen.items;
    let types_module = if types.is_empty() {
        quote! {}
    } else {
        let doc = format!(" Argument and output types of `{ty}`'s tools, from its snapshot.");
        quote! {
            #[doc = #doc]
            #[allow(missing_docs, clippy::all)]
            #vis mod #module {
                #(#types)*
            }
        }
    };
    (methods, types_module)
}

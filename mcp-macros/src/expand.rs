//! Emits the code for a declaration: the handle the struct becomes (here), with the
//! builder chain (`chain`, `oauth`), the typed methods and their types (`methods`) and
//! the `DECLARATION` constant (`declaration`).

mod access;
mod chain;
mod declaration;
mod methods;
mod oauth;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields};

use crate::check::{self, Planned};
use crate::ctxt::Ctxt;
use crate::parse::Decl;
use crate::schema::snake;
use crate::snapshot;

pub fn mcp(attr: TokenStream, item: TokenStream) -> TokenStream {
    let decl = match syn::parse2::<Decl>(attr) {
        Ok(d) => d,
        Err(e) => return fallback(item, e),
    };
    let input = match syn::parse2::<DeriveInput>(item.clone()) {
        Ok(i) => i,
        Err(e) => return fallback(item, e),
    };
    let mut cx = Ctxt::default();
    // Only a struct with named fields (or none) can get the handle's shape; anything
    // else is given back as written.
    let mut shape_ok = input.generics.params.is_empty();
    let fields: Vec<(syn::Ident, syn::Type)> = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(n) => n
                .named
                .iter()
                .filter_map(|f| f.ident.clone().map(|i| (i, f.ty.clone())))
                .collect(),
            Fields::Unit => Vec::new(),
            Fields::Unnamed(u) => {
                cx.error(
                    u.span(),
                    "an MCP server struct has named fields (its inputs), or none",
                );
                shape_ok = false;
                Vec::new()
            }
        },
        _ => {
            cx.error(input.ident.span(), "`#[mcp]` goes on a struct");
            shape_ok = false;
            Vec::new()
        }
    };
    if !input.generics.params.is_empty() {
        cx.error(
            input.generics.span(),
            "an MCP server struct cannot be generic",
        );
    }
    check::settings(&decl, &mut cx, input.ident.span());
    let name = decl
        .snapshot
        .as_ref()
        .map(|s| s.value())
        .unwrap_or_else(|| snake(&input.ident.to_string()));
    let anchor = decl
        .url
        .as_ref()
        .map(|u| u.span())
        .unwrap_or(input.ident.span());
    let (snap, skipped) = snapshot::find(&name);
    let snap = match snap {
        Ok(s) => s,
        Err(msg) => {
            cx.error(anchor, msg);
            None
        }
    };
    let skipped = skipped_warnings(&skipped, snap.as_ref().map(|s| s.path.as_path()), anchor);
    let planned = match &snap {
        Some(s) => check::against_snapshot(&decl, &s.snapshot.tools, &mut cx),
        None => Vec::new(),
    };
    let errors = match cx.finish() {
        Ok(()) => None,
        Err(e) if !shape_ok => return fallback(item, e),
        Err(e) => Some(e.to_compile_error()),
    };
    let server_name = snake(&input.ident.to_string());
    // With errors, the struct still gets everything the rest of the program uses
    // (`new`, `with_context`, the handle, typed methods), so the declaration's own
    // errors are the only ones reported.
    let out = generate(
        &decl,
        &input,
        &fields,
        &server_name,
        snap.as_ref(),
        &planned,
        errors.is_some(),
    );
    quote! { #out #errors #skipped }
}

/// A compile-time warning for each snapshot folder the lookup passed over (another
/// user's, or writable by others), at the declaration: stable Rust has no warning API
/// for macros, so each is the use of a deprecated item whose note is the warning.
fn skipped_warnings(
    skipped: &[snapshot::Skipped],
    used: Option<&std::path::Path>,
    anchor: Span,
) -> TokenStream {
    let instead = match used {
        Some(p) => format!("the snapshot {} is used instead", p.display()),
        None => "the declaration is checked at run time only".to_owned(),
    };
    let each = skipped.iter().map(|s| {
        let note = format!("{s}; {instead}");
        quote_spanned! { anchor=>
            const _: () = {
                #[deprecated(note = #note)]
                #[allow(non_upper_case_globals)]
                const mcp_snapshot_folder_skipped: () = ();
                mcp_snapshot_folder_skipped
            };
        }
    });
    quote! { #(#each)* }
}

/// The user's item, unchanged, next to the errors: the rest of the crate still sees it.
fn fallback(item: TokenStream, e: syn::Error) -> TokenStream {
    let errors = e.to_compile_error();
    quote! { #item #errors }
}

fn generate(
    d: &Decl,
    input: &DeriveInput,
    fields: &[(syn::Ident, syn::Type)],
    name: &str,
    snap: Option<&snapshot::Found>,
    planned: &[Planned],
    broken: bool,
) -> TokenStream {
    let krate: TokenStream = match &d.krate {
        Some(p) => p.to_token_stream(),
        None => quote! { ::mcp_runtime },
    };
    let ty = &input.ident;
    let vis = &input.vis;
    let attrs = &input.attrs;
    let chain = chain::chain(d, &krate, name, snap);
    let (methods, types_module) = methods::typed_methods(planned, &krate, ty, vis);
    // What this build depends on besides the source: the snapshot, or (without one) the
    // file that changes when a snapshot is added — so snapshots take effect on the next
    // build, whatever the declaration's state.
    let watched = match snap {
        Some(s) => Some(s.path.clone()),
        None => snapshot::watched_without_snapshot(),
    }
    .map(|p| {
        let p = p.display().to_string();
        quote! { const _: &[u8] = ::core::include_bytes!(#p); }
    });
    let declaration = declaration::declaration(d, &krate, name, snap);
    let field_defs = fields.iter().map(|(i, t)| quote! { #i: #t });
    let field_params: Vec<TokenStream> = fields.iter().map(|(i, t)| quote! { #i: #t }).collect();
    let field_names: Vec<&syn::Ident> = fields.iter().map(|(i, _)| i).collect();
    let struct_fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(n) => {
                let named = n.named.iter();
                quote! { #(#named,)* }
            }
            _ => quote! {},
        },
        _ => quote! {},
    };
    let _ = field_defs;
    let new_doc = format!(
        " Declares the `{name}` server with these inputs. Nothing connects until it is first used. Cheap to clone: clones share the inputs and the connection."
    );
    // A declaration with errors never runs (the crate does not compile): its handle is
    // a placeholder that keeps the rest of the program checking cleanly.
    let make = if broken {
        quote! {
            let __mcp: #krate::Mcp = ::core::unreachable!("the #[mcp] declaration has errors");
        }
    } else {
        quote! { let __mcp = #chain; }
    };
    // The struct the user wrote becomes a cheap handle: its inputs and the server's
    // handle live behind one `Arc` (the fields struct), which callbacks reach weakly.
    // Derives apply to the fields struct; `Debug` is forwarded when derived, `Clone`
    // is the handle's own.
    let fields_ty = format_ident!("__{}Fields", ty);
    let weak_ty = format_ident!("__{}Weak", ty);
    let is_derive = |a: &&syn::Attribute| a.path().is_ident("derive");
    let derives: Vec<&syn::Attribute> = attrs.iter().filter(is_derive).collect();
    let others: Vec<&syn::Attribute> = attrs.iter().filter(|a| !is_derive(a)).collect();
    let derives_debug = derives.iter().any(|a| {
        a.parse_args_with(
            syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated,
        )
        .is_ok_and(|paths| {
            paths
                .iter()
                .any(|p| p.segments.last().is_some_and(|s| s.ident == "Debug"))
        })
    });
    let debug = derives_debug.then(|| {
        quote! {
            #[automatically_derived]
            impl ::core::fmt::Debug for #ty {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    ::core::fmt::Debug::fmt(&*self.__mcp_inner, f)
                }
            }
        }
    });
    let span = Span::call_site();
    quote_spanned! { span=>
        #(#others)*
        #vis struct #ty {
            #[doc(hidden)]
            __mcp_inner: ::std::sync::Arc<#fields_ty>,
        }

        #[doc(hidden)]
        #[allow(non_camel_case_types, missing_docs, dead_code)]
        #(#derives)*
        #vis struct #fields_ty {
            #struct_fields
            #[doc(hidden)]
            __mcp: #krate::Mcp,
        }

        #[doc(hidden)]
        #[allow(non_camel_case_types, missing_docs, dead_code)]
        #[derive(Clone)]
        #vis struct #weak_ty(::std::sync::Weak<#fields_ty>);

        #[automatically_derived]
        #[allow(dead_code)]
        impl #weak_ty {
            fn upgrade(&self) -> ::core::option::Option<#ty> {
                self.0.upgrade().map(|__mcp_inner| #ty { __mcp_inner })
            }
        }

        #[automatically_derived]
        impl ::core::clone::Clone for #ty {
            fn clone(&self) -> Self {
                #ty { __mcp_inner: ::std::clone::Clone::clone(&self.__mcp_inner) }
            }
        }

        #debug

        /// The inputs, as fields (`self.input` in the struct's own methods).
        #[automatically_derived]
        impl ::core::ops::Deref for #ty {
            type Target = #fields_ty;
            fn deref(&self) -> &#fields_ty {
                &self.__mcp_inner
            }
        }

        #[automatically_derived]
        impl ::core::convert::From<#ty> for #krate::Mcp {
            fn from(declared: #ty) -> #krate::Mcp {
                ::std::clone::Clone::clone(&declared.__mcp_inner.__mcp)
            }
        }

        #[automatically_derived]
        impl ::core::convert::From<&#ty> for #krate::Mcp {
            fn from(declared: &#ty) -> #krate::Mcp {
                ::std::clone::Clone::clone(&declared.__mcp_inner.__mcp)
            }
        }

        #[automatically_derived]
        #[allow(dead_code)]
        impl #ty {
            #[doc = #new_doc]
            #[allow(clippy::new_ret_no_self, clippy::too_many_arguments)]
            pub fn new(#(#field_params),*) -> Self {
                Self::with_context(#krate::declared::Context::default() #(, #field_names)*)
            }

            /// Like `new`, with per-connection configuration (HTTP proxy, request timeout).
            #[allow(clippy::too_many_arguments, unreachable_code, unused_variables, unused_assignments)]
            pub fn with_context(__mcp_context: #krate::declared::Context #(, #field_params)*) -> Self {
                let __mcp_inner = ::std::sync::Arc::new_cyclic(|__mcp_weak_inner: &::std::sync::Weak<#fields_ty>| {
                    let __mcp_weak = &#weak_ty(::std::clone::Clone::clone(__mcp_weak_inner));
                    #make
                    #fields_ty { #(#field_names,)* __mcp }
                });
                #ty { __mcp_inner }
            }

            /// The server's handle: its tools (shaped as declared), calls by name,
            /// prompts, resources, change listening, authorization and `close`. The
            /// typed methods of the snapshot's tools are this struct's own.
            pub fn mcp(&self) -> &#krate::Mcp {
                &self.__mcp_inner.__mcp
            }

            #declaration

            #(#methods)*
        }

        #types_module

        #watched
    }
}

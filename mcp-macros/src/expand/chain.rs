//! The `Mcp::builder(...)` chain a declaration becomes: connection settings, tool
//! shapes, approvals, hooks, OAuth, the snapshot. It is evaluated inside the generated
//! `with_context`, where `__mcp_weak` (the instance, weakly) and `__mcp_context` are
//! in scope.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use super::access::{lit_string, with_this};
use super::oauth::oauth_with;
use crate::parse::{Decl, Predicate, Source, Timeout};
use crate::schema::pascal;
use crate::snapshot;

/// The builder chain, ending in `.build_or_defer()`.
pub(super) fn chain(
    d: &Decl,
    krate: &TokenStream,
    name: &str,
    snap: Option<&snapshot::Found>,
) -> TokenStream {
    let mut chain = quote! { #krate::Mcp::builder(#name) };
    if let Some(u) = &d.url {
        chain.extend(quote! { .url(#u) });
    }
    if let Some((_, argv)) = &d.command {
        chain.extend(quote! { .command([#(#argv),*]) });
    }
    if let Some(dir) = &d.directory {
        chain.extend(quote! { .directory(#dir) });
    }
    if !d.inherit_env.is_empty() {
        let names = d.inherit_env.iter().map(|n| &n.value);
        chain.extend(quote! { .inherit_env([#(#names),*]) });
    }
    if d.inherit_all_env.is_some() {
        chain.extend(quote! { .inherit_all_env() });
    }
    let none = quote! { ::core::option::Option::None };
    for (k, v) in &d.env {
        let key = &k.value;
        match v {
            Source::Lit(l) => {
                let s = lit_string(l);
                chain.extend(quote! { .env(#key, #s) });
            }
            Source::Method(p) => {
                let f = with_this(p, quote! {}, quote! { ::std::string::String::new() }, |c| {
                    quote! { ::std::string::ToString::to_string(&#c) }
                });
                chain.extend(quote! { .env_with(#key, #f) });
            }
        }
    }
    if let Some(p) = &d.transport {
        let f = with_this(
            p,
            quote! {},
            quote! { ::core::result::Result::Err(#krate::Error::closed("the server object is gone")) },
            |c| quote! { ::core::result::Result::Ok(#c) },
        );
        chain.extend(quote! { .transport(#f) });
    }
    for (h, v) in &d.headers {
        match v {
            Source::Lit(l) => {
                let s = lit_string(l);
                chain.extend(quote! { .header(#h, #s) });
            }
            Source::Method(p) => {
                let f = with_this(p, quote! {}, none.clone(), |c| {
                    quote! { ::core::option::Option::Some(::std::string::ToString::to_string(&#c)) }
                });
                chain.extend(quote! { .header_with(#h, #f) });
            }
        }
    }
    match &d.bearer_token {
        Some(Source::Lit(l)) => {
            let s = lit_string(l);
            chain.extend(quote! { .bearer_token(#s) });
        }
        Some(Source::Method(p)) => {
            let f = with_this(p, quote! {}, none.clone(), |c| {
                quote! { ::core::option::Option::Some(::std::string::ToString::to_string(&#c)) }
            });
            chain.extend(quote! { .bearer_token_with(#f) });
        }
        None => {}
    }
    match &d.timeout {
        Some((_, Timeout::Secs(t))) => {
            chain.extend(quote! { .timeout(::std::time::Duration::from_secs(#t)) });
        }
        Some((_, Timeout::Float(t))) => {
            chain.extend(quote! { .timeout(::std::time::Duration::from_secs_f64(#t)) });
        }
        Some((_, Timeout::Expr(e))) => {
            // As written: rustc says so at the user's tokens if it is not a `Duration`.
            let span = e
                .clone()
                .into_iter()
                .next()
                .map_or(Span::call_site(), |t| t.span());
            chain.extend(quote_spanned! { span=> .timeout({ let __mcp_timeout: ::std::time::Duration = #e; __mcp_timeout }) });
        }
        None => {}
    }
    if let Some(l) = &d.log_level {
        let v = format_ident!("{}", pascal(&l.value));
        chain.extend(quote! { .log_level(#krate::model::LogLevel::#v) });
    }
    if let Some((_, kinds)) = &d.input_requests {
        let form = kinds.iter().any(|k| k == "form");
        let url = kinds.iter().any(|k| k == "url");
        chain.extend(
            quote! { .input_requests(#krate::input::InputKinds { form: #form, url: #url }) },
        );
    }
    for ext in &d.extensions {
        let n = &ext.name.value;
        let settings = ext.settings.iter().map(|(k, v)| {
            let key = k.to_string();
            match v {
                Source::Lit(l) => quote! { (#key, #krate::__private::to_value(#l)) },
                Source::Method(p) => {
                    syn::Error::new(p.span(), "extension settings are literals").to_compile_error()
                }
            }
        });
        chain.extend(quote! {
            .extension(#n, #krate::__private::serde_json::Value::Object(
                [#(#settings),*].into_iter().map(|(k, v): (&str, #krate::__private::serde_json::Value)| (::std::string::ToString::to_string(k), v)).collect()
            ))
        });
    }
    if let Some(only) = &d.only {
        let names = only.iter().map(|n| &n.value);
        chain.extend(quote! { .only([#(#names),*]) });
    }
    if !d.except.is_empty() {
        let names = d.except.iter().map(|n| &n.value);
        chain.extend(quote! { .except([#(#names),*]) });
    }
    if let Some(p) = &d.prefix {
        chain.extend(quote! { .prefix(#p) });
    }
    for t in &d.tools {
        let n = &t.name.value;
        let mut shape = quote! { #krate::declared::ToolShape::new(#n) };
        if let Some(r) = &t.rename {
            let r = &r.value;
            shape.extend(quote! { .rename(#r) });
        }
        if let Some(desc) = &t.description {
            shape.extend(quote! { .description(#desc) });
        }
        for (k, v) in &t.fixed {
            let key = &k.value;
            match v {
                Source::Lit(l) => {
                    shape.extend(quote! { .fixed_argument(#key, #krate::__private::to_value(#l)) })
                }
                Source::Method(p) => {
                    let f = with_this(
                        p,
                        quote! {},
                        quote! { #krate::__private::serde_json::Value::Null },
                        |c| {
                            quote! { #krate::__private::to_value(#c) }
                        },
                    );
                    shape.extend(quote! { .fixed_argument_with(#key, #f) });
                }
            }
        }
        if let Some(p) = &t.wrap {
            shape.extend(quote_spanned! { p.span()=>
                .wrap({
                    let __mcp_w = ::std::clone::Clone::clone(__mcp_weak);
                    move |__mcp_result: #krate::CallToolResult, __mcp_args: #krate::__private::serde_json::Value| {
                        let __mcp_this = __mcp_w.upgrade();
                        async move {
                            match __mcp_this {
                                ::core::option::Option::Some(__mcp_this) => #p(&__mcp_this, __mcp_result, __mcp_args).await,
                                ::core::option::Option::None => ::core::result::Result::Ok(__mcp_result),
                            }
                        }
                    }
                })
            });
        }
        chain.extend(quote! { .tool(#shape) });
    }
    for p in &d.local_tools {
        chain.extend(
            quote_spanned! { p.span()=> .local_tool(<#p as ::core::default::Default>::default()) },
        );
    }
    for a in &d.approvals {
        let names = a.names.iter().map(|n| &n.value);
        let names = quote! { { let __mcp_names: ::std::vec::Vec<&str> = ::std::vec![#(#names),*]; __mcp_names } };
        match &a.predicate {
            None => chain.extend(quote! { .requires_approval(#names) }),
            Some(Predicate::Builtin(b)) => {
                let body = match b.to_string().as_str() {
                    "destructive" => quote! { __mcp_tool.is_destructive() },
                    "open_world" => quote! {
                        __mcp_tool.annotations.as_ref().and_then(|a| a.open_world_hint).unwrap_or(true)
                    },
                    _ => quote! { !__mcp_tool.is_read_only() },
                };
                chain.extend(
                    quote! { .requires_approval_if(#names, |__mcp_tool: &#krate::Tool| #body) },
                );
            }
            Some(Predicate::Closure(c)) => {
                // Passed as written: the builder's bound types its parameter (`&Tool`).
                chain.extend(quote! { .requires_approval_if(#names, #c) });
            }
            Some(Predicate::Method(p)) => {
                chain.extend(quote_spanned! { p.span()=>
                    .requires_approval_if(#names, {
                        let __mcp_w = ::std::clone::Clone::clone(__mcp_weak);
                        move |__mcp_tool: &#krate::Tool| match __mcp_w.upgrade() {
                            ::core::option::Option::Some(__mcp_this) => #p(&__mcp_this, __mcp_tool),
                            ::core::option::Option::None => true,
                        }
                    })
                });
            }
        }
    }
    if let Some(defer) = &d.defer {
        let names = defer.iter().map(|n| &n.value);
        chain.extend(quote! { .defer({ let __mcp_names: ::std::vec::Vec<&str> = ::std::vec![#(#names),*]; __mcp_names }) });
    }
    for p in &d.after_change {
        chain.extend(quote_spanned! { p.span()=>
            .after_change({
                let __mcp_w = ::std::clone::Clone::clone(__mcp_weak);
                move |__mcp_change: &#krate::Change| {
                    if let ::core::option::Option::Some(__mcp_this) = __mcp_w.upgrade() { #p(&__mcp_this, __mcp_change) }
                }
            })
        });
    }
    for p in &d.after_progress {
        chain.extend(quote_spanned! { p.span()=>
            .after_progress({
                let __mcp_w = ::std::clone::Clone::clone(__mcp_weak);
                move |__mcp_progress: &#krate::model::Progress| {
                    if let ::core::option::Option::Some(__mcp_this) = __mcp_w.upgrade() { #p(&__mcp_this, __mcp_progress) }
                }
            })
        });
    }
    for p in &d.before_input_request {
        chain.extend(quote_spanned! { p.span()=>
            .before_input_request({
                let __mcp_w = ::std::clone::Clone::clone(__mcp_weak);
                move |__mcp_request: #krate::InputRequest| {
                    let __mcp_this = __mcp_w.upgrade();
                    async move {
                        match __mcp_this {
                            ::core::option::Option::Some(__mcp_this) => #p(&__mcp_this, __mcp_request).await,
                            ::core::option::Option::None => ::core::option::Option::None,
                        }
                    }
                }
            })
        });
    }
    if let Some(o) = &d.oauth {
        chain.extend(oauth_with(o, krate));
    }
    if let Some(drift) = &d.drift {
        let v = format_ident!("{}", pascal(&drift.value));
        chain.extend(quote! { .drift(#krate::declared::DriftPolicy::#v) });
    }
    if let Some(s) = snap {
        let path = s.path.display().to_string();
        chain.extend(quote! { .snapshot(::core::include_str!(#path)) });
    }
    chain.extend(quote! { .context(__mcp_context) .build_or_defer() });
    chain
}

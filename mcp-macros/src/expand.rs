//! Emits the code for a declaration.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use serde_json::Value;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Lit, Path};

use crate::check::{self, Planned};
use crate::ctxt::Ctxt;
use crate::parse::{Decl, Predicate, Source, Timeout};
use crate::schema::{ident, pascal, snake, Gen, Role};
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

fn lit_string(l: &Lit) -> TokenStream {
    match l {
        Lit::Str(s) => quote! { #s },
        other => quote! { ::std::string::ToString::to_string(&#other) },
    }
}

/// A closure body's access to the instance: `Self::method(&*this)`.
fn with_this(
    path: &Path,
    args: TokenStream,
    default: TokenStream,
    map: impl FnOnce(TokenStream) -> TokenStream,
) -> TokenStream {
    let call = quote_spanned! { path.span()=> #path(&__mcp_this #args) };
    let mapped = map(call);
    quote! {{
        let __mcp_w = ::std::clone::Clone::clone(__mcp_weak);
        move || match __mcp_w.upgrade() {
            ::core::option::Option::Some(__mcp_this) => #mapped,
            ::core::option::Option::None => #default,
        }
    }}
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
        // An identifier names an input (a field), `Self::m` a method; both read on the
        // instance when the server is first used.
        let value = |v: &Source| -> TokenStream {
            match v {
                Source::Lit(l) => lit_string(l),
                Source::Method(p) => match p.get_ident() {
                    Some(field) => {
                        quote! { ::std::string::ToString::to_string(&__mcp_this.#field) }
                    }
                    None => {
                        quote_spanned! { p.span()=> ::std::string::ToString::to_string(&#p(&__mcp_this)) }
                    }
                },
            }
        };
        let lazy = |v: &Source| -> TokenStream {
            let get = value(v);
            quote! {{
                let __mcp_w2 = ::std::clone::Clone::clone(&__mcp_w);
                move || {
                    let __mcp_v = __mcp_w2.upgrade().map(|__mcp_this| #get);
                    async move {
                        __mcp_v.map(#krate::Secret::new).ok_or_else(|| #krate::Error::closed("the server object is gone"))
                    }
                }
            }}
        };
        let mut oauth = quote! { #krate::auth::OAuth::new() };
        let mut client_id = None;
        let mut client_secret = None;
        for (k, v) in &o.settings {
            match k.to_string().as_str() {
                "owner" => {
                    let v = value(v);
                    oauth.extend(quote! { .owner(#v) });
                }
                "client_id" => client_id = Some(value(v)),
                "client_secret" => client_secret = Some(value(v)),
                "private_key" => {
                    let v = value(v);
                    oauth.extend(quote! { .private_key(#v) });
                }
                "redirect_uri" => {
                    let v = value(v);
                    oauth.extend(quote! { .redirect_uri(#v) });
                }
                "client_metadata_url" => {
                    let v = value(v);
                    oauth.extend(quote! { .client_metadata_url(#v) });
                }
                "assertion" => {
                    let f = lazy(v);
                    oauth.extend(quote! { .assertion(#f) });
                }
                "grant" => {
                    let g = match v {
                        Source::Method(p) => {
                            match p.get_ident().map(|i| i.to_string()).as_deref() {
                                Some("client_credentials") => quote! { ClientCredentials },
                                Some("jwt_bearer") => quote! { JwtBearer },
                                _ => quote! { AuthorizationCode },
                            }
                        }
                        Source::Lit(_) => quote! { AuthorizationCode },
                    };
                    oauth.extend(quote! { .grant(#krate::auth::Grant::#g) });
                }
                _ => {}
            }
        }
        if let Some(id) = client_id {
            let secret = match client_secret {
                Some(s) => quote! { ::core::option::Option::Some(#s) },
                None => quote! { ::core::option::Option::None },
            };
            oauth.extend(quote! { .client(#id, #secret) });
        }
        if !o.scopes.is_empty() {
            let scopes = &o.scopes;
            oauth.extend(quote! { .scopes([#(#scopes),*]) });
        }
        if !o.identity_provider.is_empty() {
            let get = |name: &str| {
                o.identity_provider
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| value(v))
                    .unwrap_or_else(|| quote! { ::std::string::String::new() })
            };
            let (issuer, id, secret) = (get("issuer"), get("client_id"), get("client_secret"));
            let id_token = o
                .identity_provider
                .iter()
                .find(|(k, _)| k == "id_token")
                .map(|(_, v)| lazy(v))
                .unwrap_or_else(|| quote! { || async { ::core::result::Result::Err(#krate::Error::closed("no id_token")) } });
            oauth.extend(quote! { .identity_provider(#krate::auth::IdentityProvider::new(#issuer, #id, #secret, #id_token)) });
        }
        chain.extend(quote! {
            .oauth_with({
                let __mcp_w = ::std::clone::Clone::clone(__mcp_weak);
                move || {
                    let __mcp_this = __mcp_w.upgrade()?;
                    let _ = &__mcp_this;
                    ::core::option::Option::Some(#oauth)
                }
            })
        });
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

    // Typed per-tool methods, from the snapshot.
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
    // The declaration as written, readable at run time.
    let declaration = {
        let opt = |v: Option<String>| match v {
            Some(v) => quote! { ::core::option::Option::Some(#v) },
            None => quote! { ::core::option::Option::None },
        };
        let list = |v: Vec<String>| quote! { &[#(#v),*] };
        let url = opt(d.url.as_ref().map(|u| u.value()));
        let command = list(
            d.command
                .as_ref()
                .map(|(_, argv)| argv.iter().map(|a| a.value()).collect())
                .unwrap_or_default(),
        );
        let custom = d.transport.is_some();
        let prefix = opt(d.prefix.as_ref().map(|p| p.value()));
        let only = match &d.only {
            Some(names) => {
                let l = list(names.iter().map(|n| n.value.clone()).collect());
                quote! { ::core::option::Option::Some(#l) }
            }
            None => quote! { ::core::option::Option::None },
        };
        let except = list(d.except.iter().map(|n| n.value.clone()).collect());
        let renames = d.tools.iter().filter_map(|t| {
            let (from, to) = (&t.name.value, &t.rename.as_ref()?.value);
            Some(quote! { (#from, #to) })
        });
        let fixed = d.tools.iter().flat_map(|t| {
            let tool = t.name.value.clone();
            t.fixed.iter().map(move |(k, _)| {
                let k = &k.value;
                quote! { (#tool, #k) }
            })
        });
        let approvals = list(
            d.approvals
                .iter()
                .flat_map(|a| a.names.iter().map(|n| n.value.clone()))
                .collect(),
        );
        let for_all = d.approvals.iter().any(|a| a.names.is_empty());
        let predicates = d.approvals.iter().any(|a| a.predicate.is_some());
        let defer = match &d.defer {
            Some(names) => {
                let l = list(names.iter().map(|n| n.value.clone()).collect());
                quote! { ::core::option::Option::Some(#l) }
            }
            None => quote! { ::core::option::Option::None },
        };
        let snapshot = opt(snap.map(|s| s.path.display().to_string()));
        quote! {
            /// What the `#[mcp]` declaration says, as written.
            pub const DECLARATION: #krate::declared::Declaration = #krate::declared::Declaration {
                name: #name,
                url: #url,
                command: #command,
                custom_transport: #custom,
                prefix: #prefix,
                only: #only,
                except: #except,
                renames: &[#(#renames),*],
                fixed_arguments: &[#(#fixed),*],
                requires_approval: #approvals,
                approval_for_all: #for_all,
                approval_predicates: #predicates,
                defer: #defer,
                snapshot: #snapshot,
            };
        }
    };
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

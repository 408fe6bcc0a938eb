//! `mcp!(name, key = value, …)`: one line attaches a server to an agent (Nexo's `mcp`
//! macro), checked at compile time: an unknown key (with a did-you-mean), a key that
//! does not fit the transport, a missing `command` or `url` — each an error at its
//! token, all at once. Expands to an expression of type
//! `Result<mcp_runtime::Mcp, mcp_runtime::Error>`.
//!
//! ```text
//! mcp!(fs, command = "npx", args = ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
//!      env = { "LOG" => "warn" }, directory = "/srv")
//! mcp!(gmail, url = "https://gmail.example.com/mcp", headers = { "X-Org" => org() },
//!      token = || user.gmail_token())          // re-read for every request
//! ```

use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, LitStr, Token};

use crate::ctxt::{hint, Ctxt};

const KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "inherit_env",
    "inherit_all_env",
    "directory",
    "url",
    "headers",
    "token",
];
const STDIO_ONLY: &[&str] = &["args", "env", "inherit_env", "inherit_all_env", "directory"];
const HTTP_ONLY: &[&str] = &["headers", "token"];

/// The tokens of one value: everything up to the next comma outside brackets (so any
/// Rust expression works without parsing it here).
fn value_tokens(input: ParseStream) -> syn::Result<TokenStream> {
    let mut out = TokenStream::new();
    while !input.is_empty() && !input.peek(Token![,]) {
        let tt: proc_macro2::TokenTree = input.parse()?;
        out.extend(std::iter::once(tt));
    }
    if out.is_empty() {
        return Err(input.error("a value is missing here"));
    }
    Ok(out)
}

/// `"K" => value`.
struct Pair {
    key: LitStr,
    value: TokenStream,
}

impl Parse for Pair {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: LitStr = input.parse()?;
        input.parse::<Token![=>]>()?;
        Ok(Pair {
            key,
            value: value_tokens(input)?,
        })
    }
}

enum Value {
    Expr(TokenStream),
    Map(Vec<Pair>),
}

struct Setting {
    key: Ident,
    value: Value,
}

impl Parse for Setting {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Ident = input.parse()?;
        input.parse::<Token![=]>()?;
        let value = if input.peek(syn::token::Brace) {
            let content;
            syn::braced!(content in input);
            let pairs: Punctuated<Pair, Token![,]> =
                content.parse_terminated(Pair::parse, Token![,])?;
            Value::Map(pairs.into_iter().collect())
        } else {
            Value::Expr(value_tokens(input)?)
        };
        Ok(Setting { key, value })
    }
}

struct Attach {
    name: Ident,
    settings: Vec<Setting>,
}

impl Parse for Attach {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                "mcp! starts with the server's name, like `mcp!(fs, command = \"npx\", …)`",
            )
        })?;
        let mut settings = Vec::new();
        while !input.is_empty() {
            input.parse::<Token![,]>()?;
            if input.is_empty() {
                break;
            }
            settings.push(input.parse()?);
        }
        Ok(Attach { name, settings })
    }
}

/// Expands `mcp!(…)`.
pub fn attach(input: TokenStream) -> TokenStream {
    let a: Attach = match syn::parse2(input) {
        Ok(a) => a,
        Err(e) => return as_expression(e),
    };
    let mut cx = Ctxt::default();
    let mut seen: Vec<String> = Vec::new();
    for s in &a.settings {
        let k = s.key.to_string();
        if !KEYS.contains(&k.as_str()) {
            cx.error(
                s.key.span(),
                format!(
                    "unknown key `{k}`: mcp! takes {}{}",
                    KEYS.join(", "),
                    hint(&k, KEYS)
                ),
            );
        } else if seen.contains(&k) {
            cx.error(s.key.span(), format!("`{k}` is given twice"));
        }
        seen.push(k);
        let is_map = matches!(s.value, Value::Map(_));
        let wants_map = matches!(s.key.to_string().as_str(), "env" | "headers");
        if is_map != wants_map && KEYS.contains(&s.key.to_string().as_str()) {
            let how = if wants_map {
                format!("`{} = {{ \"NAME\" => value, … }}`", s.key)
            } else {
                format!("`{} = value`", s.key)
            };
            cx.error(s.key.span(), format!("write it as {how}"));
        }
    }
    let find = |k: &str| a.settings.iter().find(|s| s.key == k);
    let (command, url) = (find("command"), find("url"));
    match (command, url) {
        (None, None) => cx.error(
            a.name.span(),
            "a server needs `command = \"…\"` (stdio) or `url = \"…\"` (HTTP)",
        ),
        (Some(_), Some(u)) => cx.error(u.key.span(), "give `command` or `url`, not both"),
        _ => {}
    }
    for s in &a.settings {
        let k = s.key.to_string();
        if command.is_some() && HTTP_ONLY.contains(&k.as_str()) {
            cx.error(
                s.key.span(),
                format!("`{k}` is for HTTP servers (`url`); a stdio server takes `env`"),
            );
        }
        if url.is_some() && STDIO_ONLY.contains(&k.as_str()) {
            cx.error(
                s.key.span(),
                format!("`{k}` is for stdio servers (`command`); an HTTP server takes `headers` and `token`"),
            );
        }
    }
    // A literal URL is checked now, with the runtime's own rule.
    if let Some(Setting {
        value: Value::Expr(tokens),
        ..
    }) = url
    {
        if let Ok(s) = syn::parse2::<LitStr>(tokens.clone()) {
            if let Err(e) = crate::url_rule::check(&s.value()) {
                cx.error(s.span(), e);
            }
        }
    }
    // `inherit_all_env = true` hands the server every secret of this process: it is
    // written out, never computed.
    if let Some(s) = find("inherit_all_env") {
        let literal = match &s.value {
            Value::Expr(tokens) => syn::parse2::<syn::LitBool>(tokens.clone()).ok(),
            Value::Map(_) => None,
        };
        if literal.is_none() {
            cx.error(
                s.key.span(),
                "write `inherit_all_env = true` (the whole environment, secrets included) or leave it out; a server gets a clean environment by default",
            );
        }
    }
    if let Err(e) = cx.finish() {
        return as_expression(e);
    }
    expand(&a)
}

/// The errors, inside an expression of the macro's own type: each error shows at its
/// token, and nothing else follows from the declaration being wrong.
fn as_expression(e: syn::Error) -> TokenStream {
    let errors = e.to_compile_error();
    quote! {{
        #errors
        ::core::result::Result::<::mcp_agent::runtime::Mcp, ::mcp_agent::runtime::Error>::Err(
            ::mcp_agent::runtime::Error::transport("this mcp! line has errors")
        )
    }}
}

fn expand(a: &Attach) -> TokenStream {
    let krate = quote! { ::mcp_agent::runtime };
    let name = a.name.to_string();
    let mut chain = quote! { #krate::Mcp::builder(#name) };
    let expr = |s: &Setting| match &s.value {
        Value::Expr(e) => Some(e.clone()),
        Value::Map(_) => None,
    };
    let pairs = |s: &Setting| match &s.value {
        Value::Map(p) => p.iter().map(|p| (p.key.clone(), p.value.clone())).collect(),
        Value::Expr(_) => Vec::new(),
    };
    let find = |k: &str| a.settings.iter().find(|s| s.key == k);
    if let Some(command) = find("command").and_then(expr) {
        let args = find("args").and_then(expr);
        let args = match args {
            Some(args) => {
                quote! { .chain(::std::iter::IntoIterator::into_iter(#args).map(|a| ::std::string::ToString::to_string(&a))) }
            }
            None => quote! {},
        };
        chain.extend(quote! {
            .command(::std::iter::once(::std::string::ToString::to_string(&#command)) #args)
        });
        for (k, v) in find("env").map(pairs).unwrap_or_default() {
            chain.extend(quote! { .env(#k, ::std::string::ToString::to_string(&#v)) });
        }
        if let Some(names) = find("inherit_env").and_then(expr) {
            chain.extend(quote! {
                .inherit_env(::std::iter::IntoIterator::into_iter(#names).map(|n| ::std::string::ToString::to_string(&n)))
            });
        }
        let all = find("inherit_all_env")
            .and_then(expr)
            .and_then(|t| syn::parse2::<syn::LitBool>(t).ok());
        if all.is_some_and(|b| b.value) {
            chain.extend(quote! { .inherit_all_env() });
        }
        if let Some(d) = find("directory").and_then(expr) {
            chain.extend(quote! { .directory(::std::string::ToString::to_string(&#d)) });
        }
    }
    if let Some(url) = find("url").and_then(expr) {
        chain.extend(quote! { .url(::std::string::ToString::to_string(&#url)) });
        for (k, v) in find("headers").map(pairs).unwrap_or_default() {
            chain.extend(quote! { .header(#k, ::std::string::ToString::to_string(&#v)) });
        }
        // Authorization from `token` wins over a header of that name (it is set last).
        // A closure (`|| …`, `move || …`) is read for every request, so a rotated token
        // needs no reconnect; anything else is a value, read once.
        if let Some(t) = find("token").and_then(expr) {
            let first = t.clone().into_iter().next().map(|tt| tt.to_string());
            if matches!(first.as_deref(), Some("|" | "||" | "move")) {
                chain.extend(quote! {
                    .bearer_token_with({
                        let read = #t;
                        move || ::core::option::Option::Some(::std::string::ToString::to_string(&read()))
                    })
                });
            } else {
                chain.extend(quote! { .bearer_token(::std::string::ToString::to_string(&#t)) });
            }
        }
    }
    quote! { { #chain.build() } }
}

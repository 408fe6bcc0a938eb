//! `mcp!(name, setting, …)`: one line attaches a server to an agent (Nexo's `mcp`
//! macro), in the words of `#[mcp]` and `Mcp::builder` — the same key names and
//! forms for the same settings (docs/declaring-servers.md has the table) — with any
//! Rust expression as a value. Checked at compile time: an unknown key (with a
//! did-you-mean), a key in the wrong form, a key that does not fit the transport, a
//! missing `command` or `url` — each an error at its token, all at once. Expands to
//! an expression of type `Result<mcp_runtime::Mcp, mcp_runtime::Error>`.
//!
//! ```text
//! mcp!(fs, command("npx", "-y", "@modelcontextprotocol/server-filesystem", dir.display()),
//!      env(LOG = "warn"), directory = "/srv", only(read_file, list_directory))
//! mcp!(gmail, url = "https://gmail.example.com/mcp", header("X-Org", org()),
//!      bearer_token = || user.gmail_token(),      // re-read for every request
//!      requires_approval(send_email), timeout = 30)
//! ```

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, LitStr, Token};

use crate::ctxt::{hint, Ctxt};

/// Each key, the form it takes, and what it is for.
const KEYS: &[(&str, Form, Fits)] = &[
    ("command", Form::List, Fits::Stdio),
    ("env", Form::Pairs, Fits::Stdio),
    ("inherit_env", Form::List, Fits::Stdio),
    ("inherit_all_env", Form::Flag, Fits::Stdio),
    ("directory", Form::Value, Fits::Stdio),
    ("url", Form::Value, Fits::Http),
    ("header", Form::List, Fits::Http),
    ("bearer_token", Form::Value, Fits::Http),
    ("timeout", Form::Value, Fits::Both),
    ("prefix", Form::Value, Fits::Both),
    ("only", Form::List, Fits::Both),
    ("except", Form::List, Fits::Both),
    ("requires_approval", Form::ListOrFlag, Fits::Both),
    ("defer", Form::ListOrFlag, Fits::Both),
];

/// Keys of an earlier `mcp!` and what they are now.
const RENAMED: &[(&str, &str)] = &[
    (
        "args",
        "the arguments go inside `command(…)`: `command(\"npx\", \"-y\", \"pkg\")`",
    ),
    (
        "headers",
        "write each header as `header(\"Name\", value)`, as `#[mcp]` does",
    ),
    (
        "token",
        "the key is `bearer_token`, as in `#[mcp]` and `McpBuilder::bearer_token`",
    ),
];

#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// `key = value`
    Value,
    /// `key(a, b, …)`
    List,
    /// `key(NAME = value, …)`
    Pairs,
    /// `key`
    Flag,
    /// `key(a, b)` or `key` (every tool)
    ListOrFlag,
}

#[derive(Clone, Copy, PartialEq)]
enum Fits {
    Stdio,
    Http,
    Both,
}

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

/// One item inside `key(…)`: a value, or `NAME = value`.
struct Item {
    name: Option<(String, Span)>,
    value: TokenStream,
}

impl Parse for Item {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let named = (input.peek(Ident) || input.peek(LitStr)) && input.peek2(Token![=]);
        let name = if named {
            let name = if input.peek(LitStr) {
                let s: LitStr = input.parse()?;
                (s.value(), s.span())
            } else {
                let i: Ident = input.parse()?;
                (i.to_string(), i.span())
            };
            input.parse::<Token![=]>()?;
            Some(name)
        } else {
            None
        };
        Ok(Item {
            name,
            value: value_tokens(input)?,
        })
    }
}

enum Value {
    Expr(TokenStream),
    List(Span, Vec<Item>),
    Flag,
}

struct Setting {
    key: Ident,
    value: Value,
}

impl Parse for Setting {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Ident = input.parse()?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Value::Expr(value_tokens(input)?)
        } else if input.peek(syn::token::Paren) {
            let content;
            let parens = syn::parenthesized!(content in input);
            let items: Punctuated<Item, Token![,]> =
                content.parse_terminated(Item::parse, Token![,])?;
            Value::List(parens.span.join(), items.into_iter().collect())
        } else {
            Value::Flag
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
                "mcp! starts with the server's name, like `mcp!(fs, command(\"npx\", …))`",
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

/// How `key` is written in the form it takes.
fn how(key: &str, form: Form) -> String {
    match (key, form) {
        ("command", _) => "`command(\"program\", \"argument\", …)`".into(),
        ("env", _) => "`env(NAME = value, …)`".into(),
        ("header", _) => "`header(\"Name\", value)`".into(),
        ("inherit_all_env", _) => {
            "`inherit_all_env` (the whole environment, secrets included)".into()
        }
        (_, Form::Value) => format!("`{key} = value`"),
        (_, Form::List) => format!("`{key}(a, b, …)`"),
        (_, Form::Pairs) => format!("`{key}(NAME = value, …)`"),
        (_, Form::Flag) => format!("`{key}`"),
        (_, Form::ListOrFlag) => format!("`{key}(a, b, …)`, or `{key}` for every tool"),
    }
}

/// Expands `mcp!(…)`.
pub fn attach(input: TokenStream) -> TokenStream {
    let a: Attach = match syn::parse2(input) {
        Ok(a) => a,
        Err(e) => return as_expression(e),
    };
    let mut cx = Ctxt::default();
    let names: Vec<&str> = KEYS.iter().map(|(k, _, _)| *k).collect();
    let mut seen: Vec<String> = Vec::new();
    for s in &a.settings {
        let k = s.key.to_string();
        let Some(&(_, form, _)) = KEYS.iter().find(|(name, _, _)| *name == k) else {
            match RENAMED.iter().find(|(old, _)| *old == k) {
                Some((_, now)) => cx.error(s.key.span(), format!("`{k}`: {now}")),
                None => cx.error(
                    s.key.span(),
                    format!(
                        "unknown key `{k}`: mcp! takes {}{}",
                        names.join(", "),
                        hint(&k, &names)
                    ),
                ),
            }
            continue;
        };
        if seen.contains(&k) && k != "header" {
            cx.error(s.key.span(), format!("`{k}` is given twice"));
        }
        seen.push(k.clone());
        let fits = match (&s.value, form) {
            (Value::Expr(_), Form::Value) | (Value::Flag, Form::Flag | Form::ListOrFlag) => true,
            (Value::List(_, items), Form::List | Form::ListOrFlag) => {
                items.iter().all(|i| i.name.is_none())
            }
            (Value::List(_, items), Form::Pairs) => items.iter().all(|i| i.name.is_some()),
            _ => false,
        };
        if !fits {
            cx.error(s.key.span(), format!("write it as {}", how(&k, form)));
            continue;
        }
        if let Value::List(span, items) = &s.value {
            match k.as_str() {
                "command" if items.is_empty() => {
                    cx.error(*span, "`command(…)` names the program to start")
                }
                "header" if items.len() != 2 => cx.error(
                    *span,
                    "`header` takes a name and a value: `header(\"Name\", value)`",
                ),
                _ => {}
            }
        }
    }
    let find = |k: &str| a.settings.iter().find(|s| s.key == k);
    let (command, url) = (find("command"), find("url"));
    match (command, url) {
        (None, None) => cx.error(
            a.name.span(),
            "a server needs `command(\"program\", …)` (stdio) or `url = \"…\"` (HTTP)",
        ),
        (Some(_), Some(u)) => cx.error(u.key.span(), "give `command` or `url`, not both"),
        _ => {}
    }
    // What fits the transport, once there is exactly one.
    for s in a
        .settings
        .iter()
        .filter(|_| command.is_some() != url.is_some())
    {
        let k = s.key.to_string();
        let fits = KEYS.iter().find(|(name, _, _)| *name == k).map(|k| k.2);
        if command.is_some() && fits == Some(Fits::Http) {
            cx.error(
                s.key.span(),
                format!("`{k}` is for HTTP servers (`url`); a stdio server takes `env`"),
            );
        }
        if url.is_some() && fits == Some(Fits::Stdio) {
            cx.error(
                s.key.span(),
                format!("`{k}` is for stdio servers (`command`); an HTTP server takes `header` and `bearer_token`"),
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

/// A closure (`|| …`, `move || …`) is read for every request; anything else is a
/// value, read once.
fn is_closure(t: &TokenStream) -> bool {
    let first = t.clone().into_iter().next().map(|tt| tt.to_string());
    matches!(first.as_deref(), Some("|" | "||" | "move"))
}

/// A tool name: an identifier or a string, as in `#[mcp]`.
fn name_of(t: &TokenStream) -> TokenStream {
    match syn::parse2::<Ident>(t.clone()) {
        Ok(i) => {
            let s = LitStr::new(&i.to_string(), i.span());
            quote! { ::std::string::String::from(#s) }
        }
        Err(_) => quote! { ::std::string::ToString::to_string(&#t) },
    }
}

fn expand(a: &Attach) -> TokenStream {
    let krate = quote! { ::mcp_agent::runtime };
    let name = a.name.to_string();
    let mut chain = quote! { #krate::Mcp::builder(#name) };
    let string = |t: &TokenStream| quote! { ::std::string::ToString::to_string(&#t) };
    for s in &a.settings {
        let key = s.key.to_string();
        let items: &[Item] = match &s.value {
            Value::List(_, items) => items,
            _ => &[],
        };
        let values: Vec<TokenStream> = items.iter().map(|i| string(&i.value)).collect();
        let tools: Vec<TokenStream> = items.iter().map(|i| name_of(&i.value)).collect();
        let expr = match &s.value {
            Value::Expr(e) => Some(e),
            _ => None,
        };
        chain.extend(match (key.as_str(), expr) {
            ("command", _) => quote! { .command([#(#values),*]) },
            ("env", _) => {
                let mut out = TokenStream::new();
                for i in items {
                    let (n, span) = i.name.clone().unwrap_or_else(|| (String::new(), Span::call_site()));
                    let n = LitStr::new(&n, span);
                    let v = string(&i.value);
                    out.extend(quote! { .env(#n, #v) });
                }
                out
            }
            ("inherit_env", _) => quote! { .inherit_env([#(#values),*]) },
            ("inherit_all_env", _) => quote! { .inherit_all_env() },
            ("directory", Some(d)) => {
                let d = string(d);
                quote! { .directory(#d) }
            }
            ("url", Some(u)) => {
                let u = string(u);
                quote! { .url(#u) }
            }
            ("header", _) => match items {
                [n, v] if is_closure(&v.value) => {
                    let (n, v) = (string(&n.value), &v.value);
                    quote! {
                        .header_with(#n, {
                            let read = #v;
                            move || ::core::option::Option::Some(::std::string::ToString::to_string(&read()))
                        })
                    }
                }
                [n, v] => {
                    let (n, v) = (string(&n.value), string(&v.value));
                    quote! { .header(#n, #v) }
                }
                _ => TokenStream::new(),
            },
            // Authorization from `bearer_token` wins over a header of that name.
            ("bearer_token", Some(t)) if is_closure(t) => quote! {
                .bearer_token_with({
                    let read = #t;
                    move || ::core::option::Option::Some(::std::string::ToString::to_string(&read()))
                })
            },
            ("bearer_token", Some(t)) => {
                let t = string(t);
                quote! { .bearer_token(#t) }
            }
            // Seconds as a number, as in `#[mcp]`; anything else is a `Duration`.
            ("timeout", Some(t)) => match syn::parse2::<syn::Lit>(t.clone()) {
                Ok(syn::Lit::Int(_) | syn::Lit::Float(_)) => {
                    quote! { .timeout(::std::time::Duration::from_secs_f64((#t) as f64)) }
                }
                _ => quote! { .timeout(#t) },
            },
            ("prefix", Some(p)) => {
                let p = string(p);
                quote! { .prefix(#p) }
            }
            ("only", _) => quote! { .only([#(#tools),*]) },
            ("except", _) => quote! { .except([#(#tools),*]) },
            ("requires_approval", _) => {
                quote! { .requires_approval(::std::vec::Vec::<::std::string::String>::from([#(#tools),*])) }
            }
            ("defer", _) => {
                quote! { .defer(::std::vec::Vec::<::std::string::String>::from([#(#tools),*])) }
            }
            _ => TokenStream::new(),
        });
    }
    quote! { { #chain.build() } }
}

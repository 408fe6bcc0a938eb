//! Parses `#[mcp(...)]` into a typed model. Parsing emits no tokens.

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, Lit, LitFloat, LitInt, LitStr, Path, Token};

use crate::ctxt::hint;

/// A tool or setting name, written as an identifier or a string (`"get-sum"`).
#[derive(Clone)]
pub struct Name {
    pub value: String,
    pub span: Span,
}

impl Parse for Name {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(LitStr) {
            let s: LitStr = input.parse()?;
            Ok(Name {
                value: s.value(),
                span: s.span(),
            })
        } else {
            let i = Ident::parse_any(input)?;
            Ok(Name {
                value: i.unraw().to_string(),
                span: i.span(),
            })
        }
    }
}

/// A value: a literal, or a method of the struct (`Self::token`) evaluated on the
/// instance when needed.
#[derive(Clone)]
pub enum Source {
    Lit(Lit),
    Method(Path),
}

impl Parse for Source {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(Lit) {
            Ok(Source::Lit(input.parse()?))
        } else if input.peek(Token![Self]) || input.peek(Ident) || input.peek(Token![::]) {
            Ok(Source::Method(input.parse()?))
        } else {
            Err(input.error("expected a literal or a method of the struct, like `Self::token`"))
        }
    }
}

pub struct ToolDecl {
    pub name: Name,
    pub rename: Option<Name>,
    pub description: Option<LitStr>,
    pub fixed: Vec<(Name, Source)>,
    pub wrap: Option<Path>,
}

pub enum Predicate {
    Builtin(Ident),
    Method(Path),
    /// `if = |tool| …`: a closure given the `&Tool`.
    Closure(TokenStream),
}

/// `timeout = 30`, `timeout = 2.5` (seconds) or `timeout = Duration::from_millis(500)`.
pub enum Timeout {
    Secs(LitInt),
    Float(LitFloat),
    /// Any other expression, emitted as written (rustc checks it is a `Duration`).
    Expr(TokenStream),
}

/// A word written as an identifier or a string: `log_level = warning` or `"warning"`.
#[derive(Clone)]
pub struct Word {
    pub value: String,
    pub span: Span,
}

impl Parse for Word {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(LitStr) {
            let s: LitStr = input.parse()?;
            return Ok(Word {
                value: s.value(),
                span: s.span(),
            });
        }
        let i = Ident::parse_any(input).map_err(|e| {
            syn::Error::new(e.span(), "expected a word, like `warning` or \"warning\"")
        })?;
        Ok(Word {
            value: i.unraw().to_string(),
            span: i.span(),
        })
    }
}

/// The tokens up to the next `,` at this level (an expression, a closure).
fn until_comma(input: ParseStream) -> syn::Result<TokenStream> {
    let mut out = TokenStream::new();
    while !input.is_empty() && !input.peek(Token![,]) {
        let tt: proc_macro2::TokenTree = input.parse()?;
        out.extend(std::iter::once(tt));
    }
    Ok(out)
}

pub struct Approval {
    pub names: Vec<Name>,
    pub predicate: Option<Predicate>,
}

pub struct Extension {
    pub name: Name,
    pub settings: Vec<(Ident, Source)>,
}

/// `oauth(...)`: each value a literal, an input (a field name) or `Self::method`.
pub struct OAuthDecl {
    pub key: Ident,
    pub settings: Vec<(Ident, Source)>,
    pub scopes: Vec<LitStr>,
    pub identity_provider: Vec<(Ident, Source)>,
}

pub const OAUTH_SETTINGS: &[&str] = &[
    "owner",
    "scopes",
    "client_id",
    "client_secret",
    "grant",
    "private_key",
    "assertion",
    "identity_provider",
    "redirect_uri",
    "client_metadata_url",
];

/// One `key = value` or `key(...)` setting and where it was written.
#[derive(Default)]
pub struct Decl {
    pub krate: Option<Path>,
    pub url: Option<LitStr>,
    pub command: Option<(Ident, Vec<LitStr>)>,
    pub directory: Option<LitStr>,
    pub env: Vec<(Name, Source)>,
    /// Variables of this process passed to a `command` server (`inherit_env(...)`).
    pub inherit_env: Vec<Name>,
    /// `inherit_all_env`: the whole environment passed to a `command` server.
    pub inherit_all_env: Option<Ident>,
    pub transport: Option<Path>,
    pub headers: Vec<(LitStr, Source)>,
    pub bearer_token: Option<Source>,
    pub timeout: Option<(Ident, Timeout)>,
    pub log_level: Option<Word>,
    pub input_requests: Option<(Ident, Vec<Ident>)>,
    pub extensions: Vec<Extension>,
    pub only: Option<Vec<Name>>,
    pub except: Vec<Name>,
    pub prefix: Option<LitStr>,
    pub tools: Vec<ToolDecl>,
    pub local_tools: Vec<Path>,
    pub approvals: Vec<Approval>,
    pub defer: Option<Vec<Name>>,
    pub after_change: Vec<Path>,
    pub after_progress: Vec<Path>,
    pub before_input_request: Vec<Path>,
    pub snapshot: Option<LitStr>,
    pub drift: Option<Word>,
    pub oauth: Option<OAuthDecl>,
    /// Errors found while parsing that do not stop parsing (duplicates).
    pub errors: Vec<syn::Error>,
}

pub const SETTINGS: &[&str] = &[
    "url",
    "command",
    "directory",
    "env",
    "inherit_env",
    "inherit_all_env",
    "transport",
    "header",
    "bearer_token",
    "timeout",
    "log_level",
    "input_requests",
    "extension",
    "only",
    "except",
    "prefix",
    "tool",
    "requires_approval",
    "defer",
    "after_change",
    "after_progress",
    "before_input_request",
    "oauth",
    "snapshot",
    "drift",
    "crate",
];

fn list<T: Parse>(input: ParseStream) -> syn::Result<Vec<T>> {
    let content;
    syn::parenthesized!(content in input);
    Ok(Punctuated::<T, Token![,]>::parse_terminated(&content)?
        .into_iter()
        .collect())
}

fn once<T>(slot: &mut Option<T>, value: T, key: &Ident, errors: &mut Vec<syn::Error>) {
    if slot.is_some() {
        errors.push(syn::Error::new(
            key.span(),
            format!("duplicate `{key}` setting"),
        ));
    } else {
        *slot = Some(value);
    }
}

impl Parse for Decl {
    /// Every setting is parsed on its own (the attribute is split at its top-level
    /// commas first): a mistake in one is recorded and the others are still read, so
    /// all mistakes of an attribute are reported together.
    fn parse(input: ParseStream) -> syn::Result<Self> {
        use syn::parse::Parser as _;
        let tokens: TokenStream = input.parse()?;
        let mut d = Decl::default();
        let mut chunk = TokenStream::new();
        let mut chunks = Vec::new();
        for tt in tokens {
            match &tt {
                proc_macro2::TokenTree::Punct(p) if p.as_char() == ',' => {
                    chunks.push(std::mem::take(&mut chunk));
                }
                _ => chunk.extend(std::iter::once(tt)),
            }
        }
        chunks.push(chunk);
        for chunk in chunks {
            if chunk.is_empty() {
                continue;
            }
            let parsed = (|input: ParseStream| {
                d.setting(input)?;
                if !input.is_empty() {
                    return Err(input.error(
                        "unexpected tokens after this setting; separate settings with `,`",
                    ));
                }
                Ok(())
            })
            .parse2(chunk);
            if let Err(e) = parsed {
                d.errors.push(e);
            }
        }
        Ok(d)
    }
}

impl Decl {
    /// One `key = value` or `key(...)` setting.
    fn setting(&mut self, input: ParseStream) -> syn::Result<()> {
        let d = self;
        {
            let key = Ident::parse_any(input)?;
            let k = key.to_string();
            match k.as_str() {
                "url" => {
                    input.parse::<Token![=]>()?;
                    let v = input.parse()?;
                    once(&mut d.url, v, &key, &mut d.errors);
                }
                "command" => {
                    let argv = list::<LitStr>(input)?;
                    once(&mut d.command, (key.clone(), argv), &key, &mut d.errors);
                }
                "directory" => {
                    input.parse::<Token![=]>()?;
                    let v = input.parse()?;
                    once(&mut d.directory, v, &key, &mut d.errors);
                }
                "env" => {
                    let content;
                    syn::parenthesized!(content in input);
                    while !content.is_empty() {
                        let name: Name = content.parse()?;
                        content.parse::<Token![=]>()?;
                        d.env.push((name, content.parse()?));
                        if !content.is_empty() {
                            content.parse::<Token![,]>()?;
                        }
                    }
                }
                "inherit_env" => d.inherit_env.extend(list::<Name>(input)?),
                "inherit_all_env" => once(&mut d.inherit_all_env, key.clone(), &key, &mut d.errors),
                "transport" => {
                    input.parse::<Token![=]>()?;
                    let v = input.parse()?;
                    once(&mut d.transport, v, &key, &mut d.errors);
                }
                "header" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let name: LitStr = content.parse()?;
                    content.parse::<Token![,]>()?;
                    let value: Source = content.parse()?;
                    if !content.is_empty() {
                        return Err(content.error("expected `header(\"Name\", value)`"));
                    }
                    d.headers.push((name, value));
                }
                "bearer_token" => {
                    input.parse::<Token![=]>()?;
                    let v = input.parse()?;
                    once(&mut d.bearer_token, v, &key, &mut d.errors);
                }
                "timeout" => {
                    input.parse::<Token![=]>()?;
                    if input.peek(LitStr) || input.peek(syn::LitBool) {
                        return Err(input.error(
                            "`timeout` is seconds (`30`, `2.5`) or a `Duration` (`Duration::from_millis(500)`), not a string",
                        ));
                    }
                    let v = if input.peek(LitInt)
                        && (input.peek2(Token![,]) || {
                            let f = input.fork();
                            f.parse::<LitInt>().is_ok() && f.is_empty()
                        }) {
                        Timeout::Secs(input.parse()?)
                    } else if input.peek(LitFloat) {
                        Timeout::Float(input.parse()?)
                    } else {
                        let e = until_comma(input)?;
                        if e.is_empty() {
                            return Err(syn::Error::new(
                                key.span(),
                                "`timeout` needs a value: seconds (`30`, `2.5`) or a `Duration` (`Duration::from_millis(500)`)",
                            ));
                        }
                        Timeout::Expr(e)
                    };
                    once(&mut d.timeout, (key.clone(), v), &key, &mut d.errors);
                }
                "log_level" => {
                    input.parse::<Token![=]>()?;
                    let v: Word = input.parse()?;
                    once(&mut d.log_level, v, &key, &mut d.errors);
                }
                "input_requests" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let kinds = Punctuated::<Ident, Token![,]>::parse_terminated_with(
                        &content,
                        Ident::parse_any,
                    )?;
                    once(
                        &mut d.input_requests,
                        (key.clone(), kinds.into_iter().collect()),
                        &key,
                        &mut d.errors,
                    );
                }
                "extension" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let name: Name = content.parse()?;
                    let mut settings = Vec::new();
                    while !content.is_empty() {
                        content.parse::<Token![,]>()?;
                        if content.is_empty() {
                            break;
                        }
                        let k = Ident::parse_any(&content)?;
                        content.parse::<Token![=]>()?;
                        settings.push((k, content.parse()?));
                    }
                    d.extensions.push(Extension { name, settings });
                }
                "only" => {
                    let v = list(input)?;
                    once(&mut d.only, v, &key, &mut d.errors);
                }
                "except" => d.except.extend(list::<Name>(input)?),
                "prefix" => {
                    input.parse::<Token![=]>()?;
                    let v = input.parse()?;
                    once(&mut d.prefix, v, &key, &mut d.errors);
                }
                "tool" => {
                    let content;
                    syn::parenthesized!(content in input);
                    // `tool(SomeType)` adds a tool of your own; `tool(name, ...)` shapes one.
                    let fork = content.fork();
                    if let Ok(path) = fork.parse::<Path>() {
                        let upper = path.segments.last().is_some_and(|s| {
                            s.ident
                                .to_string()
                                .starts_with(|c: char| c.is_ascii_uppercase())
                        });
                        if upper && fork.is_empty() {
                            content.parse::<Path>()?;
                            d.local_tools.push(path);
                            return Ok(());
                        }
                    }
                    let name: Name = content.parse()?;
                    let mut t = ToolDecl {
                        name,
                        rename: None,
                        description: None,
                        fixed: Vec::new(),
                        wrap: None,
                    };
                    while !content.is_empty() {
                        content.parse::<Token![,]>()?;
                        if content.is_empty() {
                            break;
                        }
                        let opt = Ident::parse_any(&content)?;
                        match opt.to_string().as_str() {
                            "as" => {
                                content.parse::<Token![=]>()?;
                                t.rename = Some(content.parse()?);
                            }
                            "description" => {
                                content.parse::<Token![=]>()?;
                                t.description = Some(content.parse()?);
                            }
                            "fixed_arguments" => {
                                let inner;
                                syn::parenthesized!(inner in content);
                                while !inner.is_empty() {
                                    let k: Name = inner.parse()?;
                                    inner.parse::<Token![=]>()?;
                                    t.fixed.push((k, inner.parse()?));
                                    if !inner.is_empty() {
                                        inner.parse::<Token![,]>()?;
                                    }
                                }
                            }
                            "wrap" => {
                                content.parse::<Token![=]>()?;
                                t.wrap = Some(content.parse()?);
                            }
                            other => {
                                return Err(syn::Error::new(
                                    opt.span(),
                                    format!(
                                        "unknown tool option `{other}`: expected `as`, `description`, `fixed_arguments` or `wrap`{}",
                                        hint(other, &["as", "description", "fixed_arguments", "wrap"])
                                    ),
                                ))
                            }
                        }
                    }
                    d.tools.push(t);
                }
                "requires_approval" => {
                    let mut a = Approval {
                        names: Vec::new(),
                        predicate: None,
                    };
                    if input.peek(syn::token::Paren) {
                        let content;
                        syn::parenthesized!(content in input);
                        while !content.is_empty() {
                            if content.peek(Token![if]) {
                                let kw = content.parse::<Token![if]>()?;
                                content.parse::<Token![=]>().map_err(|_| {
                                    syn::Error::new(kw.span, "write `if = predicate`: `destructive`, `open_world`, `not_read_only`, a method like `Self::needs_approval`, or a closure `|tool| …`")
                                })?;
                                a.predicate = Some(
                                    if content.peek(Token![|])
                                        || content.peek(Token![||])
                                        || content.peek(Token![move])
                                    {
                                        Predicate::Closure(until_comma(&content)?)
                                    } else {
                                        let p: Path = content.parse().map_err(|e| {
                                        syn::Error::new(e.span(), "expected a predicate: `destructive`, `open_world`, `not_read_only`, a method like `Self::needs_approval`, or a closure `|tool| …`")
                                    })?;
                                        if p.segments.len() == 1 && p.leading_colon.is_none() {
                                            Predicate::Builtin(p.segments[0].ident.clone())
                                        } else {
                                            Predicate::Method(p)
                                        }
                                    },
                                );
                            } else {
                                let name: Name = content.parse()?;
                                if content.peek(Token![=]) {
                                    return Err(syn::Error::new(
                                        name.span,
                                        format!(
                                            "`requires_approval` has no option `{}`: list tool names, and optionally `if = predicate`",
                                            name.value
                                        ),
                                    ));
                                }
                                a.names.push(name);
                            }
                            if !content.is_empty() {
                                content.parse::<Token![,]>()?;
                            }
                        }
                    }
                    d.approvals.push(a);
                }
                "defer" => {
                    let names = if input.peek(syn::token::Paren) {
                        list(input)?
                    } else {
                        Vec::new()
                    };
                    match (&mut d.defer, names.is_empty()) {
                        (_, true) => d.defer = Some(Vec::new()),
                        (Some(existing), false) if !existing.is_empty() => existing.extend(names),
                        (Some(_), false) => {}
                        (None, false) => d.defer = Some(names),
                    }
                }
                "after_change" | "after_progress" | "before_input_request" => {
                    input.parse::<Token![=]>()?;
                    let p: Path = input.parse()?;
                    match k.as_str() {
                        "after_change" => d.after_change.push(p),
                        "after_progress" => d.after_progress.push(p),
                        _ => d.before_input_request.push(p),
                    }
                }
                "oauth" => {
                    let mut o = OAuthDecl {
                        key: key.clone(),
                        settings: Vec::new(),
                        scopes: Vec::new(),
                        identity_provider: Vec::new(),
                    };
                    if input.peek(syn::token::Paren) {
                        let content;
                        syn::parenthesized!(content in input);
                        while !content.is_empty() {
                            let k = Ident::parse_any(&content)?;
                            match k.to_string().as_str() {
                                "scopes" => o.scopes = list::<LitStr>(&content)?,
                                "identity_provider" => {
                                    let inner;
                                    syn::parenthesized!(inner in content);
                                    while !inner.is_empty() {
                                        let ik = Ident::parse_any(&inner)?;
                                        inner.parse::<Token![=]>()?;
                                        o.identity_provider.push((ik, inner.parse()?));
                                        if !inner.is_empty() {
                                            inner.parse::<Token![,]>()?;
                                        }
                                    }
                                }
                                other if OAUTH_SETTINGS.contains(&other) => {
                                    content.parse::<Token![=]>()?;
                                    o.settings.push((k, content.parse()?));
                                }
                                other => {
                                    return Err(syn::Error::new(
                                        k.span(),
                                        format!(
                                            "unknown oauth setting `{other}`{}",
                                            hint(other, OAUTH_SETTINGS)
                                        ),
                                    ))
                                }
                            }
                            if !content.is_empty() {
                                content.parse::<Token![,]>()?;
                            }
                        }
                    }
                    if d.oauth.is_some() {
                        d.errors
                            .push(syn::Error::new(key.span(), "duplicate `oauth` setting"));
                    }
                    d.oauth = Some(o);
                }
                "snapshot" => {
                    input.parse::<Token![=]>()?;
                    let v = input.parse()?;
                    once(&mut d.snapshot, v, &key, &mut d.errors);
                }
                "drift" => {
                    input.parse::<Token![=]>()?;
                    let v: Word = input.parse()?;
                    once(&mut d.drift, v, &key, &mut d.errors);
                }
                "crate" => {
                    input.parse::<Token![=]>()?;
                    let s: LitStr = input.parse()?;
                    let v = s.parse::<Path>()?;
                    once(&mut d.krate, v, &key, &mut d.errors);
                }
                other => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("unknown mcp setting `{other}`{}", hint(other, SETTINGS)),
                    ))
                }
            }
        }
        Ok(())
    }
}

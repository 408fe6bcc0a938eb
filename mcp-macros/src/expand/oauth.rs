//! The `oauth(...)` setting: the `.oauth_with(...)` link of the builder chain, whose
//! closure reads inputs and methods on the instance when the server is first used.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::access::lit_string;
use crate::parse::{OAuthDecl, Source};

/// `.oauth_with(...)` for the declaration's `oauth(...)`.
pub(super) fn oauth_with(o: &OAuthDecl, krate: &TokenStream) -> TokenStream {
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
                    Source::Method(p) => match p.get_ident().map(|i| i.to_string()).as_deref() {
                        Some("client_credentials") => quote! { ClientCredentials },
                        Some("jwt_bearer") => quote! { JwtBearer },
                        _ => quote! { AuthorizationCode },
                    },
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
    quote! {
        .oauth_with({
            let __mcp_w = ::std::clone::Clone::clone(__mcp_weak);
            move || {
                let __mcp_this = __mcp_w.upgrade()?;
                let _ = &__mcp_this;
                ::core::option::Option::Some(#oauth)
            }
        })
    }
}

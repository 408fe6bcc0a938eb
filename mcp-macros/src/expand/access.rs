//! How generated code reaches a declaration's values: literals as strings, and the
//! instance's methods from the closures the builder keeps (weakly: the server object
//! owns its handle).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Lit, Path};

pub(super) fn lit_string(l: &Lit) -> TokenStream {
    match l {
        Lit::Str(s) => quote! { #s },
        other => quote! { ::std::string::ToString::to_string(&#other) },
    }
}

/// A closure body's access to the instance: `Self::method(&*this)`.
pub(super) fn with_this(
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

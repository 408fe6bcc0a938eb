//! `DECLARATION`: the declaration as written, readable at run time
//! (`mcp_runtime::declared::Declaration`).

use proc_macro2::TokenStream;
use quote::quote;

use crate::parse::Decl;
use crate::snapshot;

/// The `DECLARATION` constant of the generated `impl`.
pub(super) fn declaration(
    d: &Decl,
    krate: &TokenStream,
    name: &str,
    snap: Option<&snapshot::Found>,
) -> TokenStream {
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
}

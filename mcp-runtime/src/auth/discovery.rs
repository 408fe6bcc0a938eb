//! Finding the authorization server: `WWW-Authenticate` challenges, Protected Resource
//! Metadata, authorization server metadata (and the 2025-03-26 fallback), and which
//! issuers the application's secrets may go to.

use super::authorization::{AsMetadata, ServerAuthorization};
use super::config::BINDING;
use super::store::{CredentialKey, CredentialStore, Credentials};
use crate::error::{Error, Result};
use crate::BoxFuture;
use mcp_runtime_core::lock;
use serde_json::{json, Value};
#[allow(unused_imports)]
use std::collections::HashMap;

/// An HTTP exchange the OAuth flow needs (provided by the HTTP transport).
pub(crate) struct HttpReply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Value,
}

pub(crate) trait AuthHttp: Send + Sync {
    fn get<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<HttpReply>>;
    fn post_form<'a>(
        &'a self,
        url: &'a str,
        form: Vec<(String, String)>,
        headers: Vec<(String, String)>,
    ) -> BoxFuture<'a, Result<HttpReply>>;
}

/// A parsed `WWW-Authenticate` header.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Challenge {
    pub scheme: String,
    pub params: HashMap<String, String>,
}

pub(crate) fn parse_www_authenticate(header: &str) -> Vec<Challenge> {
    let mut out: Vec<Challenge> = Vec::new();
    let mut rest = header.trim();
    while !rest.is_empty() {
        // A token followed by a space starts a new challenge; `k=` starts a param.
        let token_end = rest.find([' ', '=', ',']).unwrap_or(rest.len());
        let token = &rest[..token_end];
        let after = &rest[token_end..];
        if let Some(after_eq) = after.strip_prefix('=') {
            let key = token.to_ascii_lowercase();
            let mut v = after_eq.trim_start();
            let value;
            if let Some(q) = v.strip_prefix('"') {
                let mut s = String::new();
                let mut chars = q.char_indices();
                let mut end = q.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, n)) = chars.next() {
                                s.push(n);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => s.push(c),
                    }
                }
                value = s;
                v = &q[end.min(q.len())..];
            } else {
                let e = v.find(',').unwrap_or(v.len());
                value = v[..e].trim().to_owned();
                v = &v[e..];
            }
            // A parameter needs a name (`=x` after a scheme is dropped).
            if let (Some(c), false) = (out.last_mut(), key.is_empty()) {
                c.params.insert(key, value);
            }
            rest = v.trim_start_matches([',', ' ']);
        } else {
            if !token.is_empty() {
                out.push(Challenge {
                    scheme: token.to_owned(),
                    params: HashMap::new(),
                });
            }
            rest = after.trim_start_matches([',', ' ']);
        }
    }
    out
}

impl AsMetadata {
    pub(super) fn list(&self, key: &str) -> Vec<String> {
        self.raw
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
    pub(super) fn flag(&self, key: &str) -> bool {
        self.raw.get(key).and_then(Value::as_bool).unwrap_or(false)
    }
}

pub(super) fn origin_and_path(url: &str) -> (String, String) {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, ""),
            };
            let path = path.split(['?', '#']).next().unwrap_or("");
            (
                format!("{scheme}://{authority}"),
                path.trim_end_matches('/').to_owned(),
            )
        }
        None => (url.to_owned(), String::new()),
    }
}

/// The one URL rule ([`crate::url_rule`]): https, or http to this machine; no
/// userinfo; a real host.
pub(super) fn check_url(url: &str, what: &str) -> Result<()> {
    crate::url_rule::check(url)
        .map(|_| ())
        .map_err(|e| Error::config(format!("the {what} is refused: {e}")))
}

/// The server URL as credentials are keyed: scheme and host lowercase, no default
/// port, no query or fragment, no trailing slash.
pub(crate) fn canonical_resource(url: &str) -> String {
    let (origin, path) = origin_and_path(url);
    let mut origin = origin.to_ascii_lowercase();
    let default_port = if origin.starts_with("https://") {
        ":443"
    } else {
        ":80"
    };
    if origin.ends_with(default_port) {
        origin.truncate(origin.len() - default_port.len());
    }
    format!("{origin}{path}")
}

pub(super) fn metadata_from(issuer: &str, raw: Value) -> Result<AsMetadata> {
    let token_endpoint = raw
        .get("token_endpoint")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            Error::invalid_response(format!("the metadata of {issuer} has no token_endpoint"))
        })?
        .to_owned();
    Ok(AsMetadata {
        issuer: issuer.to_owned(),
        authorization_endpoint: raw
            .get("authorization_endpoint")
            .and_then(Value::as_str)
            .map(str::to_owned),
        registration_endpoint: raw
            .get("registration_endpoint")
            .and_then(Value::as_str)
            .map(str::to_owned),
        token_endpoint,
        raw,
    })
}

/// RFC 9728 §3.3: the resource in the metadata is this server — identical (scheme and
/// host case, a default port and a trailing slash aside) — or, for the document at the
/// origin's own well-known location, the origin.
pub(super) fn resource_matches(resource: &str, server: &str, at_root: bool) -> bool {
    if resource.is_empty() {
        return false;
    }
    let resource = canonical_resource(resource);
    let server = canonical_resource(server);
    resource == server || at_root && resource == canonical_resource(&origin_and_path(&server).0)
}

impl ServerAuthorization {
    /// Protected Resource Metadata, then the authorization server's metadata (or the
    /// 2025-03-26 fallbacks).
    pub(super) async fn discover(
        &self,
        http: &dyn AuthHttp,
        resource_metadata: Option<String>,
    ) -> Result<(Option<Value>, AsMetadata)> {
        let prm = self.protected_resource(http, resource_metadata).await?;
        *lock(&self.resource_param) = prm
            .as_ref()
            .and_then(|p| p.get("resource"))
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .map(str::to_owned)
            .unwrap_or_else(|| self.resource.clone());
        let metadata = match &prm {
            Some(prm) => {
                let named: Vec<&str> = prm
                    .get("authorization_servers")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                // With pinned issuers, the first named one that is pinned.
                let issuer = named
                    .iter()
                    .find(|i| self.pinned(i))
                    .or(named.first())
                    .ok_or_else(|| {
                        Error::invalid_response(
                            "the protected resource metadata names no authorization server",
                        )
                    })?
                    .to_string();
                self.allowed(&issuer)?;
                check_url(&issuer, "authorization server")?;
                self.as_metadata(http, &issuer).await?
            }
            None => self.legacy_metadata(http).await?,
        };
        Ok((prm, metadata))
    }

    /// Whether `issuer` is one the application pinned (any, when it pinned none).
    pub(super) fn pinned(&self, issuer: &str) -> bool {
        let issuers = &self.config.issuers;
        issuers.is_empty() || issuers.iter().any(|i| i == issuer)
    }

    /// Refuses an authorization server the application did not pin.
    pub(super) fn allowed(&self, issuer: &str) -> Result<()> {
        if self.pinned(issuer) {
            return Ok(());
        }
        Err(Error::config(format!(
            "{} names the authorization server {issuer}, which is not one this client may use ({}); refused before anything was sent to it",
            crate::url_rule::redact(&self.resource),
            self.config.issuers.join(", ")
        )))
    }

    /// Binds one of the application's own secrets (`what`) to `issuer`: with pinned
    /// issuers, the pin decides; otherwise the first authorization server it is used
    /// with, remembered in the store, is the only one it ever goes to.
    pub(super) async fn bind(&self, what: &str, issuer: &str) -> Result<()> {
        if !self.config.issuers.is_empty() {
            return self.allowed(issuer);
        }
        let key = CredentialKey::new("", format!("{BINDING}{what}"), "");
        let store = &self.config.store;
        match store.load(&key).await? {
            Some(bound) if bound.issuer == issuer => Ok(()),
            Some(bound) => Err(Error::config(format!(
                "{what} is bound to the authorization server {}, where it was first used; {issuer}, named by {}, does not get it (pin the authorization servers with OAuth::issuer)",
                bound.issuer,
                crate::url_rule::redact(&self.resource)
            ))),
            None => store.save(&key, &Credentials::new(issuer)).await,
        }
    }

    pub(super) async fn protected_resource(
        &self,
        http: &dyn AuthHttp,
        from_header: Option<String>,
    ) -> Result<Option<Value>> {
        let (origin, path) = origin_and_path(&self.resource);
        let mut urls = Vec::new();
        if let Some(u) = from_header {
            urls.push(u);
        } else {
            if !path.is_empty() {
                urls.push(format!(
                    "{origin}/.well-known/oauth-protected-resource{path}"
                ));
            }
            urls.push(format!("{origin}/.well-known/oauth-protected-resource"));
        }
        for url in urls {
            check_url(&url, "protected resource metadata URL")?;
            let r = http.get(&url).await?;
            if r.status == 200 && r.body.is_object() {
                let resource = r
                    .body
                    .get("resource")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                // RFC 9728 §3.3: the resource must be this server, identically (or,
                // from the origin's own document, the origin).
                let at_root = url.ends_with("/.well-known/oauth-protected-resource");
                if !resource_matches(resource, &self.resource, at_root) {
                    return Err(Error::config(format!(
                        "the server's protected resource metadata is for `{}`, not for {}; refusing to authorize",
                        crate::url_rule::redact(resource),
                        crate::url_rule::redact(&self.resource)
                    )));
                }
                return Ok(Some(r.body));
            }
        }
        Ok(None)
    }

    pub(super) async fn as_metadata(
        &self,
        http: &dyn AuthHttp,
        issuer: &str,
    ) -> Result<AsMetadata> {
        let (origin, path) = origin_and_path(issuer);
        let urls = if path.is_empty() {
            vec![
                format!("{origin}/.well-known/oauth-authorization-server"),
                format!("{origin}/.well-known/openid-configuration"),
            ]
        } else {
            vec![
                format!("{origin}/.well-known/oauth-authorization-server{path}"),
                format!("{origin}/.well-known/openid-configuration{path}"),
                format!("{origin}{path}/.well-known/openid-configuration"),
            ]
        };
        for url in urls {
            let r = http.get(&url).await?;
            if r.status != 200 || !r.body.is_object() {
                continue;
            }
            let got = r
                .body
                .get("issuer")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if got != issuer {
                return Err(Error::invalid_response(format!(
                    "the authorization server metadata at {url} names issuer `{got}`, not `{issuer}`; refused"
                )));
            }
            return metadata_from(issuer, r.body);
        }
        Err(Error::invalid_response(format!(
            "no authorization server metadata found for {issuer}"
        )))
    }

    /// 2025-03-26 servers: metadata at the MCP server's origin, else default endpoints.
    pub(super) async fn legacy_metadata(&self, http: &dyn AuthHttp) -> Result<AsMetadata> {
        let (origin, _) = origin_and_path(&self.resource);
        let r = http
            .get(&format!("{origin}/.well-known/oauth-authorization-server"))
            .await?;
        if r.status == 200 && r.body.is_object() {
            // Found at the MCP server's own origin, so it may only speak for that origin.
            let issuer = r
                .body
                .get("issuer")
                .and_then(Value::as_str)
                .unwrap_or(&origin)
                .to_owned();
            if issuer != origin {
                return Err(Error::invalid_response(format!(
                    "the authorization server metadata at {origin} names issuer `{}`; without protected resource metadata only the server's own origin can be its authorization server; refused",
                    crate::url_rule::redact(&issuer)
                )));
            }
            self.allowed(&issuer)?;
            return metadata_from(&issuer, r.body);
        }
        self.allowed(&origin)?;
        Ok(AsMetadata {
            issuer: origin.clone(),
            authorization_endpoint: Some(format!("{origin}/authorize")),
            token_endpoint: format!("{origin}/token"),
            registration_endpoint: Some(format!("{origin}/register")),
            raw: json!({"code_challenge_methods_supported": ["S256"]}),
        })
    }
}

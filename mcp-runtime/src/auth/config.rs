//! What the application configures: [`OAuth`] (grants, client, issuers, store,
//! timeouts) and the [`Grant`]s it may use.

use super::authorizer::Authorizer;
use super::store::CredentialStore;
use super::store::MemoryStore;
use crate::error::Result;
use crate::BoxFuture;
use crate::Secret;
#[allow(unused_imports)]
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Where the application's own secrets are bound to an authorization server in the
/// store (owner `""`): `CredentialKey { resource: BINDING + what, issuer: "" }`.
pub(super) const BINDING: &str = "urn:mcp-runtime:binding:";

pub(super) type SecretFn = Arc<dyn Fn() -> BoxFuture<'static, Result<Secret>> + Send + Sync>;

/// The grants a client can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Grant {
    /// A person authorizes in a browser (with PKCE): the default.
    #[default]
    AuthorizationCode,
    /// The application connects as itself, with its client secret or private key.
    ClientCredentials,
    /// A JWT the platform issued (a workload identity) is exchanged for a token.
    JwtBearer,
}

/// The enterprise identity provider of the ID-JAG flow. Its token endpoint is read
/// from its own metadata, discovered from its issuer.
#[derive(Clone)]
pub struct IdentityProvider {
    /// Its issuer (`https://acme.okta.com`).
    pub issuer: String,
    /// Your application's client id there.
    pub client_id: String,
    /// Your application's client secret there.
    pub client_secret: Secret,
    pub(super) id_token: SecretFn,
}

/// How a client authorizes with an HTTP server.
#[derive(Clone)]
pub struct OAuth {
    pub(crate) owner: String,
    pub(crate) scopes: Option<Vec<String>>,
    pub(crate) client_id: Option<String>,
    pub(crate) client_secret: Option<Secret>,
    pub(crate) private_key: Option<Secret>,
    pub(crate) grant: Grant,
    pub(crate) assertion: Option<SecretFn>,
    pub(crate) identity_provider: Option<IdentityProvider>,
    pub(crate) redirect_uri: String,
    pub(crate) client_metadata_url: Option<String>,
    pub(crate) client_name: String,
    pub(crate) store: Arc<dyn CredentialStore>,
    pub(crate) authorizer: Option<Arc<dyn Authorizer>>,
    pub(crate) max_step_ups: u32,
    pub(crate) signing_alg: String,
    pub(crate) issuers: Vec<String>,
    pub(crate) authorization_timeout: Duration,
}

impl fmt::Debug for IdentityProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdentityProvider")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .finish_non_exhaustive()
    }
}

impl IdentityProvider {
    /// An identity provider known by its issuer; `id_token` returns the signed-in
    /// user's ID token, read for every exchange.
    pub fn new<F, Fut>(
        issuer: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
        id_token: F,
    ) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Secret>> + Send + 'static,
    {
        IdentityProvider {
            issuer: issuer.into(),
            client_id: client_id.into(),
            client_secret: Secret::new(client_secret.into()),
            id_token: Arc::new(move || Box::pin(id_token())),
        }
    }
}

impl fmt::Debug for OAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth")
            .field("owner", &self.owner)
            .field("grant", &self.grant)
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .field("issuers", &self.issuers)
            .finish_non_exhaustive()
    }
}

impl Default for OAuth {
    fn default() -> Self {
        OAuth {
            owner: "default".into(),
            scopes: None,
            client_id: None,
            client_secret: None,
            private_key: None,
            grant: Grant::AuthorizationCode,
            assertion: None,
            identity_provider: None,
            redirect_uri: "http://127.0.0.1:8765/callback".into(),
            client_metadata_url: None,
            client_name: "mcp-runtime".into(),
            store: Arc::new(MemoryStore::default()),
            authorizer: None,
            max_step_ups: 2,
            signing_alg: "RS256".into(),
            issuers: Vec::new(),
            authorization_timeout: Duration::from_secs(600),
        }
    }
}

impl OAuth {
    /// The authorization code flow (with PKCE), discovering and registering as needed.
    pub fn new() -> Self {
        OAuth::default()
    }
    /// Whose credentials these are (usually a user id).
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = owner.into();
        self
    }
    /// Scopes to ask for, instead of those the server asks for.
    pub fn scopes<I: IntoIterator<Item = S>, S: Into<String>>(mut self, scopes: I) -> Self {
        self.scopes = Some(scopes.into_iter().map(Into::into).collect());
        self
    }
    /// Authorizes only with this authorization server (its issuer, exactly); call it
    /// again to allow several. A server that names any other is refused before
    /// anything is sent there. Without it, the application's own secrets (a
    /// pre-registered client, a private key, an assertion) are bound to the first
    /// authorization server they are used with.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuers.push(issuer.into());
        self
    }
    /// How long a person may take to authorize (default 10 minutes). The requests
    /// waiting for it do not time out meanwhile.
    pub fn authorization_timeout(mut self, timeout: Duration) -> Self {
        self.authorization_timeout = timeout;
        self
    }
    /// A client you registered: its id and secret go only to the authorization server
    /// named with [`issuer`](Self::issuer), or else the first one it is used with.
    pub fn client(mut self, client_id: impl Into<String>, client_secret: Option<String>) -> Self {
        self.client_id = Some(client_id.into());
        self.client_secret = client_secret.map(Secret::new);
        self
    }
    /// A private key (PEM: P-256 for ES256, RSA for RS256/PS256) that signs a
    /// short-lived client assertion (`private_key_jwt`) in place of a client secret.
    pub fn private_key(mut self, pem: impl Into<String>) -> Self {
        self.private_key = Some(Secret::new(pem.into()));
        self
    }
    /// The algorithm for an RSA private key: `RS256` (default) or `PS256`. P-256 keys
    /// always sign ES256.
    pub fn signing_alg(mut self, alg: impl Into<String>) -> Self {
        self.signing_alg = alg.into();
        self
    }
    /// The grant.
    pub fn grant(mut self, grant: Grant) -> Self {
        self.grant = grant;
        self
    }
    /// The JWT for the JWT bearer grant, read afresh for every token request.
    pub fn assertion<F, Fut>(mut self, assertion: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Secret>> + Send + 'static,
    {
        self.assertion = Some(Arc::new(move || Box::pin(assertion())));
        self.grant = Grant::JwtBearer;
        self
    }
    /// The enterprise identity provider (ID-JAG flow).
    pub fn identity_provider(mut self, idp: IdentityProvider) -> Self {
        self.identity_provider = Some(idp);
        self.grant = Grant::JwtBearer;
        self
    }
    /// Where the authorization server redirects back to.
    pub fn redirect_uri(mut self, uri: impl Into<String>) -> Self {
        self.redirect_uri = uri.into();
        self
    }
    /// The URL of your Client ID Metadata Document, used as client id where the
    /// authorization server supports it.
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }
    /// Where credentials are kept (default: in memory).
    pub fn store(mut self, store: impl CredentialStore) -> Self {
        self.store = Arc::new(store);
        self
    }
    /// Who takes a person through authorization when a server asks for it.
    pub fn authorizer(mut self, authorizer: impl Authorizer) -> Self {
        self.authorizer = Some(Arc::new(authorizer));
        self
    }
}

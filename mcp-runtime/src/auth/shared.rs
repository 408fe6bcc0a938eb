//! What the OAuth modules share, at the bottom of `auth/`: the types of a server's
//! authorization (its configuration, the session, metadata, the client, the token) and
//! the small helpers (encoding, randomness, time). Definitions only; the flow is in the
//! modules above.

use super::authorizer::Authorizer;
use super::store::{CredentialStore, Credentials};
use crate::error::Result;
use crate::BoxFuture;
use crate::Secret;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the application's own secrets are bound to an authorization server in the
/// store (owner `""`): `CredentialKey { resource: BINDING + what, issuer: "" }`.
pub(super) const BINDING: &str = "urn:mcp-runtime:binding:";

pub(super) type SecretFn = Arc<dyn Fn() -> BoxFuture<'static, Result<Secret>> + Send + Sync>;

/// The state of one server's authorization, shared by all its requests.
pub(crate) struct Session {
    pub config: OAuth,
    /// The server URL as configured.
    pub resource: String,
    /// The server URL in canonical form: the `resource` of every [`CredentialKey`].
    pub(super) key_resource: String,
    pub(super) state: tokio::sync::Mutex<State>,
    /// The token in use, read without waiting on the state lock.
    pub(super) current: Mutex<Option<Token>>,
    pub(super) rs_nonce: Mutex<Option<String>>,
    /// The resource identifier exactly as the protected resource metadata publishes
    /// it (the server URL when there is none): sent as `resource`.
    pub(super) resource_param: Mutex<String>,
    /// A redirect URI given to `start_authorization` (web applications).
    pub(super) redirect_override: Mutex<Option<String>>,
    /// The authorization `start_authorization` began, for `finish_authorization`.
    pub(super) pending: Mutex<Option<PendingAuthorization>>,
}

pub(super) struct PendingAuthorization {
    pub(super) state: String,
    pub(super) verifier: String,
    pub(super) metadata: AsMetadata,
    pub(super) client: Client,
    pub(super) creds: Credentials,
    pub(super) scopes: Vec<String>,
}

/// What a challenge led to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Challenged {
    /// Nothing to do: the request fails.
    No,
    /// Retry with what changed (a DPoP nonce, a stored or refreshed token).
    Retry,
    /// Retry with a token just obtained from the authorization server.
    Authorized,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) metadata: Option<AsMetadata>,
    pub(super) scopes: Vec<String>,
    pub(super) step_ups: u32,
}

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

/// Authorization server metadata, as far as the flow needs it.
#[derive(Clone, Debug, Default)]
pub(crate) struct AsMetadata {
    pub issuer: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub raw: Value,
}

pub(super) struct Client {
    pub(super) method: String,
    pub(super) client_id: String,
    pub(super) secret: Option<Secret>,
}

#[derive(Clone)]
pub(crate) struct Token {
    pub value: Secret,
    pub dpop: Option<Arc<p256::ecdsa::SigningKey>>,
    /// When to refresh it: before it expires by 30 s, or by half its lifetime when
    /// that is shorter, so a short-lived token is refreshed once per lifetime.
    pub refresh_at: Option<u64>,
}

//! The state of one server's authorization ([`ServerAuthorization`], shared by all its
//! requests) and what it holds: the authorization server's metadata, the client as
//! registered there, the token in use, an authorization begun in a browser.

use super::config::OAuth;
use super::store::Credentials;
use crate::Secret;
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// The state of one server's authorization, shared by all its requests.
pub(crate) struct ServerAuthorization {
    pub config: OAuth,
    /// The server URL as configured.
    pub resource: String,
    /// The server URL in canonical form: the `resource` of every [`CredentialKey`].
    pub(super) key_resource: String,
    pub(super) state: tokio::sync::Mutex<AuthorizationState>,
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

/// An authorization `start_authorization` began, for `finish_authorization`.
pub(super) struct PendingAuthorization {
    pub(super) state: String,
    pub(super) verifier: String,
    pub(super) metadata: AsMetadata,
    pub(super) client: RegisteredClient,
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

/// What the flow learned so far: the metadata, the scopes asked for, the step-ups.
#[derive(Default)]
pub(super) struct AuthorizationState {
    pub(super) metadata: Option<AsMetadata>,
    pub(super) scopes: Vec<String>,
    pub(super) step_ups: u32,
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

/// The client as the authorization server knows it: how it authenticates, its id,
/// its secret.
pub(super) struct RegisteredClient {
    pub(super) method: String,
    pub(super) client_id: String,
    pub(super) secret: Option<Secret>,
}

/// A token in use.
#[derive(Clone)]
pub(crate) struct Token {
    pub value: Secret,
    pub dpop: Option<Arc<p256::ecdsa::SigningKey>>,
    /// When to refresh it: before it expires by 30 s, or by half its lifetime when
    /// that is shorter, so a short-lived token is refreshed once per lifetime.
    pub refresh_at: Option<u64>,
}

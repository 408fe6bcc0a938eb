//! Who the client is to an authorization server: pre-registered, a Client ID Metadata
//! Document, or Dynamic Client Registration; and the person's authorization in a browser
//! (PKCE, state, the callback checked).

use super::authorization::{
    AsMetadata, PendingAuthorization, RegisteredClient, ServerAuthorization,
};
use super::authorizer::Callback;
use super::config::Grant;
use super::discovery::{check_url, AuthHttp};
use super::primitives::{b64url, random, sha256};
use super::store::{CredentialStore, Credentials};
use crate::error::{Error, Result};
use crate::Secret;
use mcp_runtime_core::lock;
use serde_json::{json, Value};
#[allow(unused_imports)]
use std::collections::HashMap;

pub(super) fn check_callback(m: &AsMetadata, cb: &Callback, state: &str) -> Result<()> {
    // RFC 9207: plain string comparison, before anything else.
    let advertised = m.flag("authorization_response_iss_parameter_supported");
    match (&cb.iss, advertised) {
        (Some(iss), _) if iss != &m.issuer => {
            return Err(Error::invalid_response(format!(
                "the redirect's iss `{iss}` is not the authorization server `{}`; refused",
                m.issuer
            )))
        }
        (None, true) => {
            return Err(Error::invalid_response(
                "the authorization server promised an iss parameter and sent none; refused",
            ))
        }
        _ => {}
    }
    if cb.state.as_deref() != Some(state) {
        return Err(Error::invalid_response(
            "the redirect's state does not match the authorization request; refused",
        ));
    }
    if let Some(e) = &cb.error {
        return Err(Error::http_status(
            401,
            format!("authorization was refused: {e}"),
        ));
    }
    Ok(())
}

impl ServerAuthorization {
    pub(super) fn redirect_uri(&self) -> String {
        lock(&self.redirect_override)
            .clone()
            .unwrap_or_else(|| self.config.redirect_uri.clone())
    }

    /// The client id (and how to authenticate) to use with this authorization server.
    pub(super) async fn client_for(
        &self,
        http: &dyn AuthHttp,
        m: &AsMetadata,
        creds: &mut Credentials,
    ) -> Result<RegisteredClient> {
        let cfg = &self.config;
        let supported = m.list("token_endpoint_auth_methods_supported");
        let pick = |secret: bool, key: bool| -> String {
            let ok = |x: &str| supported.is_empty() || supported.iter().any(|s| s == x);
            if key && ok("private_key_jwt") {
                "private_key_jwt".into()
            } else if secret && ok("client_secret_basic") {
                "client_secret_basic".into()
            } else if secret && ok("client_secret_post") {
                "client_secret_post".into()
            } else {
                "none".into()
            }
        };
        // The application's own client goes only to the authorization server it is
        // pinned or bound to: never a dynamic registration in its place.
        if let Some(id) = &cfg.client_id {
            self.bind(&format!("the client `{id}`"), &m.issuer).await?;
            creds.client_id = Some(id.clone());
            creds.client_secret = cfg.client_secret.clone();
            return Ok(RegisteredClient {
                method: pick(cfg.client_secret.is_some(), cfg.private_key.is_some()),
                client_id: id.clone(),
                secret: cfg.client_secret.clone(),
            });
        }
        // A client registered earlier, kept with this issuer's credentials, is used
        // only with that issuer.
        if let Some(id) = &creds.client_id {
            return Ok(RegisteredClient {
                method: pick(creds.client_secret.is_some(), false),
                client_id: id.clone(),
                secret: creds.client_secret.clone(),
            });
        }
        if let Some(url) = &cfg.client_metadata_url {
            if m.flag("client_id_metadata_document_supported") {
                creds.client_id = Some(url.clone());
                return Ok(RegisteredClient {
                    method: "none".into(),
                    client_id: url.clone(),
                    secret: None,
                });
            }
        }
        let endpoint = m.registration_endpoint.clone().ok_or_else(|| {
            Error::config(format!(
                "the authorization server {} offers no registration; configure a client id for it",
                m.issuer
            ))
        })?;
        check_url(&endpoint, "registration endpoint")?;
        let grant_types = match cfg.grant {
            Grant::AuthorizationCode => json!(["authorization_code", "refresh_token"]),
            Grant::ClientCredentials => json!(["client_credentials"]),
            Grant::JwtBearer => json!(["urn:ietf:params:oauth:grant-type:jwt-bearer"]),
        };
        let wants_secret =
            supported.is_empty() || supported.iter().any(|s| s.starts_with("client_secret"));
        let method = if wants_secret {
            pick(true, false)
        } else {
            "none".into()
        };
        let body = json!({
            "client_name": cfg.client_name,
            "redirect_uris": [self.redirect_uri()],
            "grant_types": grant_types,
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": "native",
        });
        let r = http
            .post_form(
                &endpoint,
                vec![("__json".into(), body.to_string())],
                Vec::new(),
            )
            .await?;
        if !(200..300).contains(&r.status) {
            return Err(Error::http_status(
                r.status,
                format!("client registration at {} failed", m.issuer),
            ));
        }
        let id = r
            .body
            .get("client_id")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::invalid_response("the registration response has no client_id"))?;
        let secret = r
            .body
            .get("client_secret")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let method = r
            .body
            .get("token_endpoint_auth_method")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| pick(secret.is_some(), false));
        creds.client_id = Some(id.to_owned());
        creds.client_secret = secret.clone().map(Secret::new);
        // Kept at once: an authorization that fails next must not lead to another
        // registration on the next attempt.
        cfg.store.save(&self.key(&m.issuer), creds).await?;
        Ok(RegisteredClient {
            method,
            client_id: id.to_owned(),
            secret: secret.map(Secret::new),
        })
    }

    pub(super) fn authorization_url(
        &self,
        m: &AsMetadata,
        client_id: &str,
        state: &str,
        verifier: &str,
        scopes: &[String],
    ) -> Result<String> {
        let endpoint = m.authorization_endpoint.clone().ok_or_else(|| {
            Error::invalid_response("the authorization server has no authorization_endpoint")
        })?;
        check_url(&endpoint, "authorization endpoint")?;
        let mut q = form_urlencoded::Serializer::new(String::new());
        q.append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", &self.redirect_uri())
            .append_pair("code_challenge", &b64url(&sha256(verifier.as_bytes())))
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", state)
            .append_pair("resource", &self.resource_param());
        let mut scopes: Vec<String> = scopes.to_vec();
        if m.list("scopes_supported")
            .iter()
            .any(|s| s == "offline_access")
            && !scopes.iter().any(|s| s == "offline_access")
        {
            scopes.push("offline_access".into());
        }
        if !scopes.is_empty() {
            q.append_pair("scope", &scopes.join(" "));
        }
        let sep = if endpoint.contains('?') { '&' } else { '?' };
        Ok(format!("{endpoint}{sep}{}", q.finish()))
    }

    /// Starts an authorization for a web application: the URL to send the user to.
    /// The authorization server redirects back to `redirect_uri`; pass what it sends
    /// to `finish_authorization`.
    pub async fn start_authorization(
        &self,
        http: &dyn AuthHttp,
        redirect_uri: &str,
    ) -> Result<String> {
        *lock(&self.redirect_override) = Some(redirect_uri.to_owned());
        let (prm, m) = self.discover(http, None).await?;
        if !m
            .list("code_challenge_methods_supported")
            .iter()
            .any(|x| x == "S256")
        {
            return Err(Error::unsupported(format!(
                "the authorization server {} does not advertise PKCE with S256; refusing to authorize",
                m.issuer
            )));
        }
        let supported = prm
            .as_ref()
            .and_then(|p| p.get("scopes_supported"))
            .and_then(Value::as_array)
            .map(|s| {
                s.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            });
        let scopes: Vec<String> = self.config.scopes.clone().or(supported).unwrap_or_default();
        let mut creds = self.stored(&m.issuer).await?;
        let client = self.client_for(http, &m, &mut creds).await?;
        let verifier = random(32)?;
        let state = random(16)?;
        let url = self.authorization_url(&m, &client.client_id, &state, &verifier, &scopes)?;
        *lock(&self.pending) = Some(PendingAuthorization {
            state,
            verifier,
            metadata: m,
            client,
            creds,
            scopes,
        });
        Ok(url)
    }

    /// Finishes what `start_authorization` started, with the callback's parameters.
    pub async fn finish_authorization(
        &self,
        http: &dyn AuthHttp,
        callback: Callback,
    ) -> Result<()> {
        let p = lock(&self.pending).take().ok_or_else(|| {
            Error::config("no authorization is in progress: call authorization_url first")
        })?;
        check_callback(&p.metadata, &callback, &p.state)?;
        let code = callback
            .code
            .ok_or_else(|| Error::invalid_response("the authorization server returned no code"))?;
        let form = vec![
            ("grant_type".to_owned(), "authorization_code".to_owned()),
            ("code".into(), code),
            ("redirect_uri".into(), self.redirect_uri()),
            ("code_verifier".into(), p.verifier),
            ("resource".into(), self.resource_param()),
        ];
        let body = self
            .token_request(http, &p.metadata, &p.client, form, None)
            .await?;
        let mut creds = p.creds;
        let token = self.store_token(&mut creds, body, None).await?;
        let mut st = self.state.lock().await;
        st.metadata = Some(p.metadata);
        st.scopes = p.scopes;
        *lock(&self.current) = Some(token);
        Ok(())
    }
}

//! Authorizes with an MCP server's OAuth, with the grant you choose, then lists its tools.
//!
//! ```sh
//! # A person authorizes in a browser (loopback redirect; set BROWSER=xdg-open to open it)
//! cargo run -p examples --example oauth -- code https://mcp.example.com/mcp
//! # The application as itself: a client secret, or a PEM private key (ES256/RS256)
//! cargo run -p examples --example oauth -- client-credentials https://mcp.example.com/mcp reports s3cret
//! cargo run -p examples --example oauth -- client-credentials https://mcp.example.com/mcp reports @reports-key.pem
//! # A workload identity (a JWT your platform issued), read for every token request
//! cargo run -p examples --example oauth -- jwt-bearer https://mcp.example.com/mcp ci /var/run/secrets/tokens/mcp-token
//! # Enterprise (ID-JAG): the user's ID token from your IdP, exchanged for a grant
//! cargo run -p examples --example oauth -- id-jag https://mcp.example.com/mcp wiki-app wiki-secret \
//!     https://acme.okta.com okta-app okta-secret id-token.jwt   # the IdP by its issuer
//! ```
//!
//! Credentials are kept in `./mcp-credentials.json` (mode 0600) and reused next time.

use mcp_runtime::auth::{FileStore, Grant, IdentityProvider, LoopbackAuthorizer, OAuth};
use mcp_runtime::{Client, HttpConfig, Secret};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> Result<String, Box<dyn std::error::Error>> {
        args.get(i).cloned().ok_or_else(|| {
            "missing arguments; see the usage at the top of examples/oauth.rs".into()
        })
    };
    let (grant, url) = (arg(0)?, arg(1)?);
    let base = OAuth::new().store(FileStore::new("mcp-credentials.json"));
    let oauth = match grant.as_str() {
        "code" => {
            let mut browser = LoopbackAuthorizer::bind()?;
            if let Ok(program) = std::env::var("BROWSER") {
                browser = browser.open_with(program);
            }
            base.redirect_uri(browser.redirect_uri())
                .authorizer(browser)
        }
        "client-credentials" => {
            let (id, secret) = (arg(2)?, arg(3)?);
            let o = base.grant(Grant::ClientCredentials);
            match secret.strip_prefix('@') {
                Some(path) => o
                    .client(id, None)
                    .private_key(std::fs::read_to_string(path)?),
                None => o.client(id, Some(secret)),
            }
        }
        "jwt-bearer" => {
            let (id, path) = (arg(2)?, arg(3)?);
            base.client(id, None).assertion(move || {
                let path = path.clone();
                async move {
                    std::fs::read_to_string(&path)
                        .map(|t| Secret::new(t.trim()))
                        .map_err(|e| {
                            mcp_runtime::Error::transport(format!("cannot read {path}: {e}"))
                        })
                }
            })
        }
        "id-jag" => {
            let (id, secret, idp_issuer, idp_id, idp_secret, id_token) =
                (arg(2)?, arg(3)?, arg(4)?, arg(5)?, arg(6)?, arg(7)?);
            base.client(id, Some(secret))
                .identity_provider(IdentityProvider::new(
                    idp_issuer,
                    idp_id,
                    idp_secret,
                    move || {
                        let path = id_token.clone();
                        async move {
                            std::fs::read_to_string(&path)
                                .map(|t| Secret::new(t.trim()))
                                .map_err(|e| {
                                    mcp_runtime::Error::transport(format!(
                                        "cannot read {path}: {e}"
                                    ))
                                })
                        }
                    },
                ))
        }
        other => {
            return Err(format!(
                "unknown grant `{other}`: use code, client-credentials, jwt-bearer or id-jag"
            )
            .into())
        }
    };
    let client = Client::builder().http(HttpConfig::new(url).oauth(oauth))?;
    for tool in client.tools().await? {
        println!("- {}", tool.name);
    }
    client.close().await?;
    Ok(())
}

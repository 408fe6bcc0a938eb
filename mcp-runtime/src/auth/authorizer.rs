//! Who takes a person through authorization: the [`Authorizer`] trait, the redirect's
//! [`Callback`], and [`LoopbackAuthorizer`] for command-line tools.

use crate::error::{Error, Result};
use crate::BoxFuture;

/// What the authorization server redirected back with.
#[derive(Clone, Default, PartialEq)]
pub struct Callback {
    /// `code`.
    pub code: Option<String>,
    /// `state`.
    pub state: Option<String>,
    /// `iss` (RFC 9207).
    pub iss: Option<String>,
    /// `error`.
    pub error: Option<String>,
}

impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The code is a one-time secret.
        f.debug_struct("Callback")
            .field("code", &self.code.as_ref().map(|_| "[redacted]"))
            .field("state", &self.state)
            .field("iss", &self.iss)
            .field("error", &self.error)
            .finish()
    }
}

impl Callback {
    /// Reads the query of a redirect URL (or a bare query string).
    pub fn from_url(url: &str) -> Self {
        let query = url.split_once('?').map(|(_, q)| q).unwrap_or(url);
        let query = query.split('#').next().unwrap_or("");
        let mut c = Callback::default();
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            match &*k {
                "code" => c.code = Some(v.into_owned()),
                "state" => c.state = Some(v.into_owned()),
                "iss" => c.iss = Some(v.into_owned()),
                "error" => c.error = Some(v.into_owned()),
                _ => {}
            }
        }
        c
    }
}

/// Takes a person through authorization: given the URL to open, returns what the
/// authorization server redirected back with. A command-line tool opens a browser and
/// listens on a loopback redirect; a test fetches the URL without following redirects.
pub trait Authorizer: Send + Sync + 'static {
    /// Opens `url` and waits for the redirect.
    fn authorize(&self, url: String) -> BoxFuture<'static, Result<Callback>>;

    /// Opens `url` and waits for the redirect that answers it: the one carrying
    /// `state`, the value the client generated and put in the URL. The client calls
    /// this one; the default is [`authorize`](Self::authorize). An authorizer that
    /// tells redirects apart should use `state` rather than read it back from the URL,
    /// whose authorization endpoint may carry a `state` of its own.
    fn authorize_with_state(
        &self,
        url: String,
        state: &str,
    ) -> BoxFuture<'static, Result<Callback>> {
        let _ = state;
        self.authorize(url)
    }
}

impl<F, Fut> Authorizer for F
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Callback>> + Send + 'static,
{
    fn authorize(&self, url: String) -> BoxFuture<'static, Result<Callback>> {
        Box::pin(self(url))
    }
}

/// Authorization for command-line tools: shows the URL (and opens it with a program
/// of your choice, like `xdg-open`), and listens on a loopback port for the redirect.
///
/// It serves every authorization of its client, one at a time, for as long as the
/// client lives. It accepts only the redirect that carries the `state` of the
/// authorization in progress — the one the client generated, which it is handed
/// ([`Authorizer::authorize_with_state`]), never one read off the authorization
/// endpoint's URL — (anything else gets an error page, and it keeps waiting), reads at
/// most 8 KiB of a request, and gives a slow connection 10 s.
#[derive(Debug)]
pub struct LoopbackAuthorizer {
    listener: std::sync::Arc<std::net::TcpListener>,
    redirect_uri: String,
    opener: Option<String>,
    one_at_a_time: std::sync::Arc<tokio::sync::Mutex<()>>,
}

/// The longest request line the loopback listener reads.
const REQUEST_MAX: u64 = 8 * 1024;

impl LoopbackAuthorizer {
    /// Binds a free loopback port. Use [`redirect_uri`](Self::redirect_uri) as the
    /// OAuth redirect URI.
    pub fn bind() -> Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| Error::transport(format!("cannot listen on a loopback port: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::transport(e.to_string()))?
            .port();
        Ok(LoopbackAuthorizer {
            listener: std::sync::Arc::new(listener),
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
            opener: None,
            one_at_a_time: Default::default(),
        })
    }

    /// Opens the URL with this program (for example `xdg-open` or `open`); the URL is
    /// printed in any case.
    pub fn open_with(mut self, program: impl Into<String>) -> Self {
        self.opener = Some(program.into());
        self
    }

    /// The redirect URI to register and send.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }
}

/// The `state` an authorization URL carries, when the client's own is not known (a
/// direct call of [`Authorizer::authorize`]): the last one, as a client appends its
/// parameters after any the authorization endpoint's URL has.
fn state_of(url: &str) -> Option<String> {
    let query = url.split_once('?')?.1.split('#').next()?;
    form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "state")
        .last()
        .map(|(_, v)| v.into_owned())
}

/// Serves one connection: the callback when it is the one awaited.
async fn serve(stream: tokio::net::TcpStream, state: &Option<String>) -> Option<Callback> {
    use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
    let (read, mut write) = stream.into_split();
    let mut reader = tokio::io::BufReader::new(read.take(REQUEST_MAX));
    let mut line = String::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        reader.read_line(&mut line),
    )
    .await;
    if !matches!(read, Ok(Ok(n)) if n > 0 && line.ends_with('\n')) {
        return None;
    }
    let target = line.split_whitespace().nth(1).unwrap_or("").to_owned();
    let reply = |status: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    if target != "/callback" && !target.starts_with("/callback?") {
        let _ = write.write_all(reply("404 Not Found", "").as_bytes()).await;
        return None;
    }
    let callback = Callback::from_url(&target);
    if callback.state.is_none() || &callback.state != state {
        let _ = write
            .write_all(
                reply(
                    "400 Bad Request",
                    "This does not answer the authorization in progress; start again from the application.",
                )
                .as_bytes(),
            )
            .await;
        return None;
    }
    let _ = write
        .write_all(reply("200 OK", "Authorized. You can close this window.").as_bytes())
        .await;
    Some(callback)
}

impl Authorizer for LoopbackAuthorizer {
    fn authorize(&self, url: String) -> BoxFuture<'static, Result<Callback>> {
        let state = state_of(&url);
        self.wait(url, state)
    }

    fn authorize_with_state(
        &self,
        url: String,
        state: &str,
    ) -> BoxFuture<'static, Result<Callback>> {
        self.wait(url, Some(state.to_owned()))
    }
}

impl LoopbackAuthorizer {
    /// Shows (and opens) `url`, and waits for the redirect that carries `state`.
    fn wait(&self, url: String, state: Option<String>) -> BoxFuture<'static, Result<Callback>> {
        let listener = self.listener.clone();
        let opener = self.opener.clone();
        let one_at_a_time = self.one_at_a_time.clone();
        Box::pin(async move {
            let _turn = one_at_a_time.lock().await;
            let listener = listener
                .try_clone()
                .and_then(|l| {
                    l.set_nonblocking(true)?;
                    tokio::net::TcpListener::from_std(l)
                })
                .map_err(|e| Error::transport(format!("cannot listen for the redirect: {e}")))?;
            // The URL comes from the authorization server's metadata: show it inert.
            eprintln!(
                "Open this URL to authorize:\n\n  {}\n",
                crate::text::escape_controls(&url)
            );
            if let Some(program) = opener {
                // Never through a shell: the URL is one argument.
                let _ = std::process::Command::new(program).arg(&url).spawn();
            }
            loop {
                let (stream, _) = listener.accept().await.map_err(|e| {
                    Error::transport(format!("waiting for the redirect failed: {e}"))
                })?;
                if let Some(callback) = serve(stream, &state).await {
                    return Ok(callback);
                }
            }
        })
    }
}

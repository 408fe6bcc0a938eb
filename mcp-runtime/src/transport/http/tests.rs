use super::*;
use connect::check_localhost;

#[test]
fn localhost_names_must_resolve_to_loopback_only() {
    use std::net::SocketAddr;
    use tower_service::Service;
    for name in [
        "localhost",
        "LOCALHOST",
        "app.localhost",
        "a.b.localhost.",
        "x.LocalHost",
    ] {
        assert!(is_localhost_name(name), "{name}");
    }
    for name in [
        "localhost.example.com",
        "evillocalhost",
        "localhost-x",
        "127.0.0.1",
    ] {
        assert!(!is_localhost_name(name), "{name}");
    }
    let lo: SocketAddr = "127.0.0.1:80".parse().unwrap();
    let lo6: SocketAddr = "[::1]:80".parse().unwrap();
    let remote: SocketAddr = "192.0.2.7:80".parse().unwrap();
    assert!(check_localhost("app.localhost", &[lo, lo6]).is_ok());
    assert!(check_localhost("app.localhost", &[lo, remote]).is_err());
    assert!(check_localhost("app.localhost", &[]).is_err());
    // Other names may resolve anywhere (https is required for them anyway).
    assert!(check_localhost("example.com", &[remote]).is_ok());

    // Through the resolver the connector uses: a resolver that maps a localhost
    // name elsewhere is not believed. (Nothing connects: the resolver is called
    // directly.)
    #[derive(Clone)]
    struct Lying(Vec<SocketAddr>);
    impl tower_service::Service<Name> for Lying {
        type Response = std::vec::IntoIter<SocketAddr>;
        type Error = std::io::Error;
        type Future = std::future::Ready<std::io::Result<Self::Response>>;
        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: Name) -> Self::Future {
            std::future::ready(Ok(self.0.clone().into_iter()))
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let name = |n: &str| n.parse::<Name>().unwrap();
    let mut lying = CheckedResolver(Lying(vec![remote]));
    let e = rt.block_on(lying.call(name("evil.localhost"))).unwrap_err();
    assert!(e.to_string().contains("192.0.2.7"), "{e}");
    let mut honest = CheckedResolver(Lying(vec![lo]));
    let addrs: Vec<SocketAddr> = rt
        .block_on(honest.call(name("app.localhost")))
        .unwrap()
        .collect();
    assert_eq!(addrs, [lo]);
}

#[test]
fn plain_http_only_for_loopback() {
    for ok in [
        "http://localhost:3000/mcp",
        "http://127.0.0.1/mcp",
        "http://[::1]:8080/",
        "https://example.com/mcp",
    ] {
        assert!(HttpTransport::new(HttpConfig::new(ok)).is_ok(), "{ok}");
    }
    for bad in [
        "http://example.com/mcp",
        "http://10.0.0.1/mcp",
        "ftp://example.com",
        "not a url",
    ] {
        let e = HttpTransport::new(HttpConfig::new(bad)).unwrap_err();
        assert!(e.is_config(), "{bad}: {e}");
    }
    let e = HttpTransport::new(HttpConfig::new("http://example.com/mcp")).unwrap_err();
    assert!(e.to_string().contains("https://example.com"), "{e}");
    // Userinfo is refused, and never shown.
    let e =
        HttpTransport::new(HttpConfig::new("https://user:PWSECRET@example.com/mcp")).unwrap_err();
    assert!(!e.to_string().contains("PWSECRET"), "{e}");
    // A key in the query stays out of Debug.
    let c = HttpConfig::new("https://example.com/mcp?key=QSECRET");
    assert!(!format!("{c:?}").contains("QSECRET"), "{c:?}");
}

#[test]
fn secrets_stay_out_of_debug() {
    let c = HttpConfig::new("https://example.com/mcp")
        .bearer_token("tok-123456")
        .header("X-Api-Key", "key-987654");
    let d = format!("{c:?}");
    assert!(
        !d.contains("tok-123456") && !d.contains("key-987654"),
        "{d}"
    );
    assert!(d.contains("X-Api-Key"));
}

#[test]
fn endpoint_resolution() {
    let base: Uri = "http://127.0.0.1:3001/sse".parse().unwrap();
    assert_eq!(
        resolve(&base, "/message?sessionId=1").unwrap().to_string(),
        "http://127.0.0.1:3001/message?sessionId=1"
    );
    assert_eq!(
        resolve(&base, "message?x=1").unwrap().to_string(),
        "http://127.0.0.1:3001/message?x=1"
    );
    assert_eq!(
        resolve(&base, "http://127.0.0.1:3001/m")
            .unwrap()
            .to_string(),
        "http://127.0.0.1:3001/m"
    );
}

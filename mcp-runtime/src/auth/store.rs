//! Where credentials are kept, and what they are keyed by.
//!
//! Credentials are keyed by **owner, protected resource and issuer**
//! ([`CredentialKey`]): a token is only ever looked up for the MCP server it was
//! issued for, from the authorization server that issued it, so one server can never
//! be handed another's token, and forgetting an owner's credentials for one server
//! leaves their other servers alone.
//!
//! Three stores:
//! * [`MemoryStore`] — for the life of the process (the default).
//! * [`FileStore`] — a JSON file, private (0600 in a 0700 folder), replaced atomically,
//!   locked across processes; for one machine (a CLI, a desktop app).
//! * `PostgresStore` (feature `postgres`) — for applications on many machines.
//!
//! Every store also offers a lock per key ([`CredentialStore::lock`]) that the client
//! holds while it refreshes a token, so many clients — in one process or in many —
//! refresh an expiring token once, and none ends up using a rotated-away refresh token.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::lock;
use crate::error::{Error, Result};
use crate::BoxFuture;
use crate::Secret;

/// Whose credentials, for which protected resource (the MCP server, as its canonical
/// URL), from which authorization server (its issuer).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CredentialKey {
    /// Whose: usually a user id.
    pub owner: String,
    /// The protected resource the credentials were issued for.
    pub resource: String,
    /// The authorization server that issued them.
    pub issuer: String,
}

impl CredentialKey {
    /// A key.
    pub fn new(
        owner: impl Into<String>,
        resource: impl Into<String>,
        issuer: impl Into<String>,
    ) -> Self {
        CredentialKey {
            owner: owner.into(),
            resource: resource.into(),
            issuer: issuer.into(),
        }
    }
}

/// Tokens and registration kept for one [`CredentialKey`]. Secrets are [`Secret`]s:
/// never in `Debug`, `Display` or logs.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Credentials {
    /// The authorization server's issuer.
    pub issuer: String,
    /// The client id registered with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The client secret registered with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<Secret>,
    /// The access token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_token: Option<Secret>,
    /// `Bearer` or `DPoP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_type: Option<String>,
    /// The refresh token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<Secret>,
    /// When the access token expires (seconds since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// When the access token was issued (seconds since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_at: Option<u64>,
    /// The scopes granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The DPoP key (PKCS#8 PEM) the tokens are bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_key: Option<Secret>,
}

impl Credentials {
    /// Empty credentials for `issuer`, to fill in.
    pub fn new(issuer: impl Into<String>) -> Self {
        Credentials {
            issuer: issuer.into(),
            ..Default::default()
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .field("access_token", &self.access_token)
            .field("refresh_token", &self.refresh_token)
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// Held while a token is refreshed: other holders of the same key wait. Dropping it
/// releases the lock.
pub struct StoreLock(#[allow(dead_code)] Option<Box<dyn std::any::Any + Send + Sync>>);

impl StoreLock {
    /// No lock (a store whose credentials no one else can see).
    pub fn none() -> Self {
        StoreLock(None)
    }
    /// A lock released when `guard` is dropped.
    pub fn new(guard: impl std::any::Any + Send + Sync) -> Self {
        StoreLock(Some(Box::new(guard)))
    }
}

impl fmt::Debug for StoreLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StoreLock")
    }
}

/// Where credentials are kept. Implement it to keep them in your own database; every
/// method may fail (an unreadable store is an error, never "no credentials").
pub trait CredentialStore: Send + Sync + 'static {
    /// The credentials kept under `key`.
    fn load<'a>(&'a self, key: &'a CredentialKey) -> BoxFuture<'a, Result<Option<Credentials>>>;
    /// Keeps `credentials` under `key`, replacing what was there.
    fn save<'a>(
        &'a self,
        key: &'a CredentialKey,
        credentials: &'a Credentials,
    ) -> BoxFuture<'a, Result<()>>;
    /// Forgets `owner`'s credentials for `resource`, with every authorization server,
    /// and nothing else.
    fn forget<'a>(&'a self, owner: &'a str, resource: &'a str) -> BoxFuture<'a, Result<()>>;
    /// Locks `key` against every other client using this store (in this process and,
    /// for shared stores, in others) until the returned guard is dropped. The client
    /// holds it while it refreshes a token. The default locks nothing: right for a
    /// store only one client uses.
    fn lock<'a>(&'a self, key: &'a CredentialKey) -> BoxFuture<'a, Result<StoreLock>> {
        let _ = key;
        Box::pin(async { Ok(StoreLock::none()) })
    }
}

impl<T: CredentialStore + ?Sized> CredentialStore for Arc<T> {
    fn load<'a>(&'a self, key: &'a CredentialKey) -> BoxFuture<'a, Result<Option<Credentials>>> {
        (**self).load(key)
    }
    fn save<'a>(&'a self, key: &'a CredentialKey, c: &'a Credentials) -> BoxFuture<'a, Result<()>> {
        (**self).save(key, c)
    }
    fn forget<'a>(&'a self, owner: &'a str, resource: &'a str) -> BoxFuture<'a, Result<()>> {
        (**self).forget(owner, resource)
    }
    fn lock<'a>(&'a self, key: &'a CredentialKey) -> BoxFuture<'a, Result<StoreLock>> {
        (**self).lock(key)
    }
}

/// One async lock per key, for the clients of one process.
#[derive(Default)]
pub(super) struct KeyLocks(Mutex<HashMap<CredentialKey, Arc<tokio::sync::Mutex<()>>>>);

impl KeyLocks {
    pub(super) async fn lock(&self, key: &CredentialKey) -> tokio::sync::OwnedMutexGuard<()> {
        let m = lock(&self.0).entry(key.clone()).or_default().clone();
        m.lock_owned().await
    }
}

/// Credentials kept in memory for the life of the process (the default store).
#[derive(Default)]
pub struct MemoryStore {
    map: Mutex<HashMap<CredentialKey, Credentials>>,
    locks: KeyLocks,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MemoryStore")
    }
}

impl CredentialStore for MemoryStore {
    fn load<'a>(&'a self, key: &'a CredentialKey) -> BoxFuture<'a, Result<Option<Credentials>>> {
        let found = lock(&self.map).get(key).cloned();
        Box::pin(async move { Ok(found) })
    }
    fn save<'a>(&'a self, key: &'a CredentialKey, c: &'a Credentials) -> BoxFuture<'a, Result<()>> {
        lock(&self.map).insert(key.clone(), c.clone());
        Box::pin(async { Ok(()) })
    }
    fn forget<'a>(&'a self, owner: &'a str, resource: &'a str) -> BoxFuture<'a, Result<()>> {
        lock(&self.map).retain(|k, _| !(k.owner == owner && k.resource == resource));
        Box::pin(async { Ok(()) })
    }
    fn lock<'a>(&'a self, key: &'a CredentialKey) -> BoxFuture<'a, Result<StoreLock>> {
        Box::pin(async move { Ok(StoreLock::new(self.locks.lock(key).await)) })
    }
}

/// Credentials kept in a JSON file, for one machine (a command-line tool, a desktop
/// application), shared safely by every process that uses the same file:
///
/// * the folder is created private (0700), the file is private (0600);
/// * every change reads, changes and writes the file under an OS lock (`flock` on
///   `FILE.lock`) held across processes, so concurrent saves never lose each other;
/// * the new content goes to a fresh temporary file (random name, created exclusively,
///   never through a symbolic link), is flushed to disk, then renamed over the file;
/// * a file it cannot read or parse is never overwritten: the error says what to do;
/// * [`lock`](CredentialStore::lock) takes `FILE.refresh.lock`, so a token is
///   refreshed once across every process sharing the file.
#[derive(Clone)]
pub struct FileStore {
    inner: Arc<FileInner>,
}

struct FileInner {
    path: PathBuf,
    /// In-process order for changes (the OS lock orders processes).
    writing: Mutex<()>,
    refreshing: KeyLocks,
}

impl fmt::Debug for FileStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileStore")
            .field("path", &self.inner.path)
            .finish()
    }
}

/// The file's content.
#[derive(Serialize, Deserialize)]
struct FileContent {
    format: u32,
    #[serde(default)]
    credentials: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    #[serde(flatten)]
    key: CredentialKey,
    credentials: Credentials,
}

const FILE_FORMAT: u32 = 2;

impl FileStore {
    /// A store in this file (created, with its folder, when first written).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileStore {
            inner: Arc::new(FileInner {
                path: path.into(),
                writing: Mutex::new(()),
                refreshing: KeyLocks::default(),
            }),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` on the file's entries under both locks, off the async threads.
    async fn with_entries<T: Send + 'static>(
        &self,
        change: bool,
        f: impl FnOnce(&mut Vec<Entry>) -> T + Send + 'static,
    ) -> Result<T> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let _in_process = lock(&inner.writing);
            let _os = inner.os_lock(&inner.sibling("lock"))?;
            let mut entries = inner.read()?;
            let out = f(&mut entries);
            if change {
                inner.write(entries)?;
            }
            Ok(out)
        })
        .await
        .map_err(|e| Error::config(format!("the credential store task failed: {e}")))?
    }
}

impl FileInner {
    fn sibling(&self, suffix: &str) -> PathBuf {
        let mut name = self
            .path
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        name.push(format!(".{suffix}"));
        self.path.with_file_name(name)
    }

    fn dir(&self) -> PathBuf {
        match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    fn fail(&self, what: &str, e: impl fmt::Display) -> Error {
        Error::config(format!("cannot {what} {}: {e}", self.path.display()))
    }

    fn create_dir(&self) -> Result<()> {
        let dir = self.dir();
        if dir.exists() {
            return Ok(());
        }
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt as _;
            b.mode(0o700);
        }
        b.create(&dir)
            .map_err(|e| self.fail("create the folder of", e))
    }

    /// Opens `path` (0600) and locks it exclusively until the file is dropped.
    fn os_lock(&self, path: &Path) -> Result<std::fs::File> {
        self.create_dir()?;
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            opts.mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
        }
        let file = opts.open(path).map_err(|e| {
            Error::config(format!("cannot open the lock file {}: {e}", path.display()))
        })?;
        #[cfg(unix)]
        {
            use std::os::unix::io::AsRawFd as _;
            loop {
                // SAFETY: flock(2) on a descriptor we own; no memory is involved.
                let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
                if r == 0 {
                    break;
                }
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(Error::config(format!(
                        "cannot lock {}: {e}",
                        path.display()
                    )));
                }
            }
        }
        Ok(file)
    }

    fn read(&self) -> Result<Vec<Entry>> {
        let text = match std::fs::read(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.fail("read", e)),
        };
        if text.iter().all(u8::is_ascii_whitespace) {
            return Ok(Vec::new());
        }
        match serde_json::from_slice::<FileContent>(&text) {
            Ok(c) if c.format == FILE_FORMAT => Ok(c.credentials),
            Ok(c) => Err(Error::config(format!(
                "{} is in credential format {}, not {FILE_FORMAT}; it was left as it is: move it away (and authorize again) or use the version that wrote it",
                self.path.display(),
                c.format
            ))),
            Err(e) => Err(Error::config(format!(
                "{} is not a credential file this version can read ({e}); it was left as it is: fix it, or move it away and authorize again",
                self.path.display()
            ))),
        }
    }

    fn write(&self, entries: Vec<Entry>) -> Result<()> {
        use std::io::Write as _;
        self.create_dir()?;
        let content = FileContent {
            format: FILE_FORMAT,
            credentials: entries,
        };
        let text = serde_json::to_vec_pretty(&content)
            .map_err(|e| self.fail("encode the credentials for", e))?;
        let tmp = self.sibling(&format!("{}.tmp", super::primitives::random(12)?));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            opts.mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
        }
        let written = opts.open(&tmp).and_then(|mut f| {
            f.write_all(&text)?;
            f.sync_all()
        });
        if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &self.path)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(self.fail("write", e));
        }
        // The rename itself reaches the disk with the folder.
        if let Ok(d) = std::fs::File::open(self.dir()) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl CredentialStore for FileStore {
    fn load<'a>(&'a self, key: &'a CredentialKey) -> BoxFuture<'a, Result<Option<Credentials>>> {
        let key = key.clone();
        Box::pin(self.with_entries(false, move |entries| {
            entries
                .iter()
                .find(|e| e.key == key)
                .map(|e| e.credentials.clone())
        }))
    }
    fn save<'a>(&'a self, key: &'a CredentialKey, c: &'a Credentials) -> BoxFuture<'a, Result<()>> {
        let (key, c) = (key.clone(), c.clone());
        Box::pin(self.with_entries(true, move |entries| {
            match entries.iter_mut().find(|e| e.key == key) {
                Some(e) => e.credentials = c,
                None => entries.push(Entry {
                    key,
                    credentials: c,
                }),
            }
        }))
    }
    fn forget<'a>(&'a self, owner: &'a str, resource: &'a str) -> BoxFuture<'a, Result<()>> {
        let (owner, resource) = (owner.to_owned(), resource.to_owned());
        Box::pin(self.with_entries(true, move |entries| {
            entries.retain(|e| !(e.key.owner == owner && e.key.resource == resource));
        }))
    }
    fn lock<'a>(&'a self, key: &'a CredentialKey) -> BoxFuture<'a, Result<StoreLock>> {
        Box::pin(async move {
            // Tasks of this process queue on the key; processes on the lock file.
            let in_process = self.inner.refreshing.lock(key).await;
            let inner = self.inner.clone();
            let file =
                tokio::task::spawn_blocking(move || inner.os_lock(&inner.sibling("refresh.lock")))
                    .await
                    .map_err(|e| {
                        Error::config(format!("the credential store task failed: {e}"))
                    })??;
            Ok(StoreLock::new((in_process, file)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(owner: &str, resource: &str) -> CredentialKey {
        CredentialKey::new(owner, resource, "https://as.example")
    }

    fn token(t: &str) -> Credentials {
        Credentials {
            access_token: Some(Secret::new(t)),
            ..Credentials::new("https://as.example")
        }
    }

    #[tokio::test]
    async fn keys_keep_servers_and_owners_apart() {
        let store = MemoryStore::default();
        store
            .save(&key("alice", "https://a/mcp"), &token("A"))
            .await
            .unwrap();
        store
            .save(&key("alice", "https://b/mcp"), &token("B"))
            .await
            .unwrap();
        store
            .save(&key("bob", "https://a/mcp"), &token("C"))
            .await
            .unwrap();
        assert!(store
            .load(&key("alice", "https://m/mcp"))
            .await
            .unwrap()
            .is_none());
        store.forget("alice", "https://a/mcp").await.unwrap();
        assert!(store
            .load(&key("alice", "https://a/mcp"))
            .await
            .unwrap()
            .is_none());
        assert!(store
            .load(&key("alice", "https://b/mcp"))
            .await
            .unwrap()
            .is_some());
        assert!(store
            .load(&key("bob", "https://a/mcp"))
            .await
            .unwrap()
            .is_some());
    }

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcp-store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_file_store_is_private_atomic_and_keeps_what_it_cannot_read() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = scratch("file");
        let path = dir.join("sub/creds.json");
        let store = FileStore::new(&path);
        store
            .save(&key("alice", "https://a/mcp"), &token("SECRET-A"))
            .await
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
        // Another store on the same file sees it.
        let other = FileStore::new(&path);
        let got = other
            .load(&key("alice", "https://a/mcp"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            got.access_token.as_ref().map(Secret::expose),
            Some("SECRET-A")
        );
        // A file it cannot parse is refused, and left as it was.
        std::fs::write(&path, b"{ not json").unwrap();
        let e = store
            .save(&key("bob", "https://a/mcp"), &token("B"))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("move it away"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"{ not json");
        assert!(store.load(&key("alice", "https://a/mcp")).await.is_err());
        // A symbolic link planted where the file goes is replaced, never written through.
        std::fs::remove_file(&path).unwrap();
        let victim = dir.join("victim.txt");
        std::fs::write(&victim, b"keep me").unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        // (Refused, since the link's target is not a credential file; either way the
        // target is untouched.)
        let _ = store
            .save(&key("alice", "https://a/mcp"), &token("S"))
            .await;
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_saves_from_many_stores_lose_nothing() {
        let dir = scratch("many");
        let path = dir.join("creds.json");
        let mut tasks = Vec::new();
        for s in 0..4 {
            let store = FileStore::new(&path);
            tasks.push(tokio::spawn(async move {
                for i in 0..25 {
                    let k = key(&format!("owner-{s}-{i}"), "https://a/mcp");
                    store.save(&k, &token("T")).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let content: FileContent = serde_json::from_str(&text).unwrap();
        assert_eq!(content.credentials.len(), 100);
        let _ = std::fs::remove_dir_all(dir);
    }
}

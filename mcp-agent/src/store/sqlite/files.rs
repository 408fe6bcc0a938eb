//! The store's file and folder, private to this user: created so, tightened when
//! others may read or write them, never through a symbolic link.

use crate::error::{Error, Result};

/// Creates `dir` (and its missing parents) readable by this user only. An existing
/// folder is left as it is: the files in it are private on their own.
pub(super) fn private_dir(dir: &std::path::Path) -> Result<()> {
    let fail =
        |e: std::io::Error| Error::store_from(format!("cannot create {}: {e}", dir.display()), e);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(fail)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir).map_err(fail)
    }
}

/// Makes the store's file, and the `-wal` and `-shm` files beside it, private to this
/// user: created `0600` when missing, tightened to `0600` when others may read or write
/// them (SQLite gives the `-wal` and `-shm` files it creates the database file's mode).
pub(super) fn private_file(path: &std::path::Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        let fail = |what: &std::path::Path, e: std::io::Error| {
            Error::store_from(
                format!(
                    "the run store {} cannot be made private to this user (mode 0600): {e}",
                    what.display()
                ),
                e,
            )
        };
        let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        if !link {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
                .map_err(|e| fail(path, e))?;
        }
        let mut names = vec![path.to_path_buf()];
        for suffix in ["-wal", "-shm"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            names.push(name.into());
        }
        for file in names {
            let Ok(meta) = std::fs::symlink_metadata(&file) else {
                continue; // not there (yet): SQLite creates it with the file's mode
            };
            if meta.file_type().is_symlink() {
                return Err(Error::store(format!(
                    "the run store {} is a symbolic link; give the path of the file itself",
                    file.display()
                )));
            }
            if meta.permissions().mode() & 0o077 != 0 {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))
                    .map_err(|e| fail(&file, e))?;
            }
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

//! Where snapshots are looked for: the one lookup the `#[mcp]` macro, the `build.rs`
//! helper and the `mcp` CLI share.
//!
//! A snapshot says how to start its server (`"command"`) or where to reach it
//! (`"url"`), so a snapshot from somewhere else is a way to run someone else's program.
//! The lookup therefore stays **inside the project**:
//!
//! * It starts at a folder (the crate's manifest folder for the macro and the helper,
//!   the current folder for the CLI) and walks up, but never past the **project root**:
//!   the nearest folder, from the start up, that is a VCS root (it has `.git`, `.hg` or
//!   `.jj`) or a Cargo workspace root (its `Cargo.toml` has a `[workspace]` table).
//!   Outside any of those, the root is the nearest folder with a `Cargo.toml` (a
//!   package on its own is its own workspace); outside any package too, it is the
//!   start folder itself.
//! * It skips a `.mcp/` folder not owned by the current user, or writable by group or
//!   others (a folder anyone else could put a snapshot in), and says so: each
//!   [`Skipped`] folder tells what to fix.
//!
//! The macro and the helper are always bounded; the CLI goes past the root only when
//! told to (`--allow-outside-project`, [`Project::unbounded`]), and skips unsafe
//! folders even then.

use std::fmt;
use std::path::{Path, PathBuf};

/// The folder snapshots live in (at the crate or workspace root). Where it is looked
/// for, and which are used: [`Project`].
pub const DIR: &str = ".mcp";

/// The markers of a version-control root.
const VCS: [&str; 3] = [".git", ".hg", ".jj"];

/// The most of a `Cargo.toml` read to find a `[workspace]` table.
const MANIFEST_MAX: u64 = 1024 * 1024;

/// The folders a lookup may read: from its start up to the project root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Project {
    start: PathBuf,
    root: Option<PathBuf>,
}

/// A `.mcp/` folder the lookup passed over, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The folder.
    pub dir: PathBuf,
    /// Why, and what to fix.
    pub reason: String,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the snapshot folder {} is not used: {}",
            crate::text::escape(&self.dir.display().to_string(), false),
            self.reason
        )
    }
}

/// What a lookup found, and the unsafe folders it passed over on the way (warn about
/// them: they may hold the snapshot that was meant).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// The file or folder found.
    pub path: Option<PathBuf>,
    /// The `.mcp/` folders skipped before it (or before giving up), nearest first.
    pub skipped: Vec<Skipped>,
}

impl Project {
    /// The project `start` is in (see the module docs for where its root is).
    pub fn of(start: &Path) -> Project {
        Project {
            start: start.to_path_buf(),
            root: Some(project_root(start)),
        }
    }

    /// Every folder from `start` up to `/`: for the CLI's explicit
    /// `--allow-outside-project` only. Unsafe `.mcp/` folders are still skipped.
    pub fn unbounded(start: &Path) -> Project {
        Project {
            start: start.to_path_buf(),
            root: None,
        }
    }

    /// Where the lookup stops (`None` when unbounded).
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// The folder the lookup starts at.
    pub fn start(&self) -> &Path {
        &self.start
    }

    /// Whether `path` is inside the project: at or under its root. An unbounded
    /// lookup contains everything.
    pub fn contains(&self, path: &Path) -> bool {
        match &self.root {
            Some(root) => path.starts_with(root),
            None => true,
        }
    }

    /// The folders the lookup reads, nearest first: `start`, then each parent up to
    /// the root.
    pub fn folders(&self) -> impl Iterator<Item = &Path> {
        let mut past = false;
        self.start.ancestors().take_while(move |d| {
            if past {
                return false;
            }
            past = self.root.as_deref() == Some(*d);
            true
        })
    }

    /// The `.mcp/` folders the lookup may read, nearest first, with the unsafe ones
    /// among them; `wanted` keeps only the folders of interest (an unsafe folder is
    /// reported only when it is one).
    fn search(&self, wanted: impl Fn(&Path) -> bool) -> Found {
        let mut skipped = Vec::new();
        for folder in self.folders() {
            let dir = folder.join(DIR);
            if !dir.is_dir() || !wanted(&dir) {
                continue;
            }
            match check_folder(&dir) {
                Ok(()) => {
                    return Found {
                        path: Some(dir),
                        skipped,
                    }
                }
                Err(reason) => skipped.push(Skipped { dir, reason }),
            }
        }
        Found {
            path: None,
            skipped,
        }
    }

    /// The nearest usable `.mcp/` folder.
    pub fn snapshot_dir(&self) -> Found {
        self.search(|_| true)
    }

    /// The nearest usable `.mcp/<name>.json`.
    pub fn locate(&self, name: &str) -> Found {
        let file = format!("{name}.json");
        let mut found = self.search(|dir| dir.join(&file).is_file());
        found.path = found.path.map(|dir| dir.join(&file));
        found
    }
}

/// The root of the project `start` is in: the nearest folder, from `start` up, that is
/// a VCS root or a Cargo workspace root; else the nearest with a `Cargo.toml`; else
/// `start`.
pub fn project_root(start: &Path) -> PathBuf {
    let mut package = None;
    for dir in start.ancestors() {
        if VCS.iter().any(|m| dir.join(m).symlink_metadata().is_ok()) {
            return dir.to_path_buf();
        }
        let manifest = dir.join("Cargo.toml");
        if manifest.is_file() {
            if declares_workspace(&manifest) {
                return dir.to_path_buf();
            }
            if package.is_none() {
                package = Some(dir.to_path_buf());
            }
        }
    }
    package.unwrap_or_else(|| start.to_path_buf())
}

/// Whether a `Cargo.toml` has a `[workspace]` table (or a `[workspace.…]` one, which
/// implies it).
fn declares_workspace(manifest: &Path) -> bool {
    use std::io::Read as _;
    let mut text = String::new();
    let read =
        std::fs::File::open(manifest).and_then(|f| f.take(MANIFEST_MAX).read_to_string(&mut text));
    if read.is_err() {
        return false;
    }
    text.lines().any(|line| {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some(header) = line.strip_prefix('[').and_then(|l| l.split(']').next()) else {
            return false;
        };
        let header = header.trim();
        header == "workspace" || header.starts_with("workspace.")
    })
}

/// Whether a snapshot folder may be used: it (and, for a symbolic link, the link too)
/// belongs to the current user, and neither group nor others may write to it. `Err`
/// says why not and what to do.
pub fn check_folder(dir: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let shown = crate::text::escape(&dir.display().to_string(), false).into_owned();
        let link = dir
            .symlink_metadata()
            .map_err(|e| format!("it cannot be read ({e})"))?;
        if link.file_type().is_symlink() && link.uid() != me {
            return Err(format!(
                "it is a symbolic link owned by user {} (not you, user {me}); remove it, or make your own",
                link.uid()
            ));
        }
        let meta = dir
            .metadata()
            .map_err(|e| format!("it cannot be read ({e})"))?;
        if meta.uid() != me {
            return Err(format!(
                "it belongs to user {} (not you, user {me}), who could put any server's command in it; if it is yours, `chown -R {me} {shown}`",
                meta.uid()
            ));
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Err(format!(
                "it is writable by {} (mode {mode:04o}), who could put any server's command in it; `chmod go-w {shown}`",
                match (mode & 0o020 != 0, mode & 0o002 != 0) {
                    (true, true) => "group and others",
                    (true, false) => "its group",
                    _ => "others",
                },
            ));
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch tree, removed when dropped.
    struct Tree(PathBuf);

    impl Tree {
        fn new(name: &str) -> Tree {
            let dir =
                std::env::temp_dir().join(format!("mcp-core-lookup-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Tree(dir)
        }

        fn dir(&self, rel: &str) -> PathBuf {
            let d = self.0.join(rel);
            std::fs::create_dir_all(&d).unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            d
        }

        fn file(&self, rel: &str, text: &str) -> PathBuf {
            let p = self.0.join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            std::fs::write(&p, text).unwrap();
            p
        }

        /// `root/.mcp/fs.json` and the folder three levels down.
        fn planted(&self) -> PathBuf {
            self.dir(".mcp");
            self.file(".mcp/fs.json", "{\"tools\": []}");
            self.dir("a/b/c")
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_lookup_stops_at_a_vcs_or_workspace_root() {
        for marker in ["git", "workspace", "workspace-package", "hg"] {
            let t = Tree::new(marker);
            let cwd = t.planted();
            // The positive control: the project is the whole tree (its root has
            // `.git`), so the snapshot at its root is found from three levels down.
            t.dir(".git");
            assert_eq!(
                Project::of(&cwd).locate("fs").path,
                Some(t.0.join(".mcp/fs.json")),
                "{marker}: the control"
            );
            match marker {
                "git" => drop(t.dir("a/.git")),
                "hg" => drop(t.dir("a/.hg")),
                "workspace" => drop(t.file("a/Cargo.toml", "[workspace]\nmembers = []\n")),
                _ => drop(t.file("a/Cargo.toml", "[ workspace.package ] # shared\n")),
            }
            let project = Project::of(&cwd);
            assert_eq!(project.root(), Some(t.0.join("a").as_path()), "{marker}");
            assert_eq!(project.locate("fs"), Found::default(), "{marker}");
            assert_eq!(project.snapshot_dir(), Found::default(), "{marker}");
            assert!(!project.contains(&t.0.join(".mcp/fs.json")));
            assert!(project.contains(&t.0.join("a/.mcp/fs.json")));
            // Inside the project it is found, at any level.
            t.dir("a/b/.mcp");
            t.file("a/b/.mcp/fs.json", "{\"tools\": []}");
            assert_eq!(
                Project::of(&cwd).locate("fs").path,
                Some(t.0.join("a/b/.mcp/fs.json"))
            );
            // And past the root only when asked.
            std::fs::remove_dir_all(t.0.join("a/b/.mcp")).unwrap();
            assert_eq!(
                Project::unbounded(&cwd).locate("fs").path,
                Some(t.0.join(".mcp/fs.json"))
            );
        }
    }

    #[test]
    fn a_git_file_marks_a_root_and_a_package_is_its_own_project() {
        // A linked worktree or a submodule has a `.git` file.
        let t = Tree::new("gitfile");
        let cwd = t.planted();
        t.file("a/.git", "gitdir: /elsewhere\n");
        assert_eq!(project_root(&cwd), t.0.join("a"));
        std::fs::remove_file(t.0.join("a/.git")).unwrap();
        // A package that is in no workspace: its own folder.
        t.file(
            "a/b/Cargo.toml",
            "[package]\nname = \"x\"\nworkspace = \"..\"\n",
        );
        assert_eq!(project_root(&cwd), t.0.join("a/b"));
        assert_eq!(Project::of(&cwd).locate("fs"), Found::default());
        // Neither a package nor a root anywhere: the start folder alone.
        std::fs::remove_file(t.0.join("a/b/Cargo.toml")).unwrap();
        let alone = Tree::new("alone");
        let start = alone.dir("x/y");
        assert_eq!(project_root(&start), start);
        // A comment or a look-alike table is no workspace.
        for text in [
            "# [workspace]\n[package]\nname = \"x\"\n",
            "[workspace-tools]\n",
            "[package]\nworkspace = \"..\"\n",
        ] {
            t.file("a/Cargo.toml", text);
            assert_eq!(project_root(&cwd), t.0.join("a"), "{text}: a package");
            assert!(!declares_workspace(&t.0.join("a/Cargo.toml")), "{text}");
        }
    }

    #[test]
    fn the_nearest_folder_with_the_file_wins() {
        let t = Tree::new("nearest");
        t.dir(".git");
        t.dir(".mcp");
        t.file(".mcp/fs.json", "{\"tools\": []}");
        t.dir("crate/.mcp");
        t.file("crate/.mcp/other.json", "{\"tools\": []}");
        let project = Project::of(&t.0.join("crate"));
        assert_eq!(project.locate("fs").path, Some(t.0.join(".mcp/fs.json")));
        assert_eq!(
            project.locate("other").path,
            Some(t.0.join("crate/.mcp/other.json"))
        );
        assert_eq!(project.snapshot_dir().path, Some(t.0.join("crate/.mcp")));
    }

    #[cfg(unix)]
    #[test]
    fn folders_others_could_write_to_are_skipped_saying_what_to_fix() {
        use std::os::unix::fs::PermissionsExt as _;
        let t = Tree::new("modes");
        t.dir(".git");
        t.dir(".mcp");
        t.file(".mcp/fs.json", "{\"tools\": []}");
        let near = t.dir("a/.mcp");
        t.file("a/.mcp/fs.json", "{\"tools\": []}");
        let start = t.0.join("a");
        assert_eq!(
            Project::of(&start).locate("fs").path,
            Some(near.join("fs.json"))
        );
        for (mode, who) in [
            (0o777, "group and others"),
            (0o757, "others"),
            (0o775, "its group"),
            (0o1777, "group and others"),
        ] {
            std::fs::set_permissions(&near, std::fs::Permissions::from_mode(mode)).unwrap();
            let found = Project::of(&start).locate("fs");
            // The next usable one is taken; the skipped one is reported.
            assert_eq!(found.path, Some(t.0.join(".mcp/fs.json")), "{mode:o}");
            assert_eq!(found.skipped.len(), 1, "{mode:o}");
            let said = found.skipped[0].to_string();
            assert!(
                said.contains(&format!("writable by {who}")) && said.contains("chmod go-w"),
                "{mode:o}: {said}"
            );
            assert_eq!(Project::of(&start).snapshot_dir().skipped.len(), 1);
            assert!(check_folder(&near).is_err());
        }
        std::fs::set_permissions(&near, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(check_folder(&near), Ok(()));
        // A folder that lacks the file is not reported by a lookup of that file.
        std::fs::set_permissions(&near, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(Project::of(&start).locate("absent").skipped.is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn folders_of_other_users_are_skipped() {
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: giving a folder to another user needs root");
            return;
        }
        let t = Tree::new("owner");
        t.dir(".git");
        let theirs = t.dir("a/.mcp");
        t.file("a/.mcp/fs.json", "{\"tools\": []}");
        let start = t.0.join("a/b");
        std::fs::create_dir_all(&start).unwrap();
        assert_eq!(
            Project::of(&start).locate("fs").path,
            Some(theirs.join("fs.json"))
        );
        std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
        let found = Project::of(&start).locate("fs");
        assert_eq!(found.path, None);
        assert!(
            found.skipped[0].reason.contains("belongs to user 65534"),
            "{:?}",
            found.skipped
        );
        // A link to the user's own folder, planted by someone else, is theirs too.
        std::os::unix::fs::chown(&theirs, Some(0), None).unwrap();
        std::fs::remove_dir_all(&theirs).unwrap();
        let mine = t.dir("mine");
        t.file("mine/fs.json", "{\"tools\": []}");
        std::os::unix::fs::symlink(&mine, &theirs).unwrap();
        assert_eq!(
            Project::of(&start).locate("fs").path,
            Some(theirs.join("fs.json"))
        );
        std::os::unix::fs::lchown(&theirs, Some(65534), None).unwrap();
        let found = Project::of(&start).locate("fs");
        assert_eq!(found.path, None);
        assert!(
            found.skipped[0].reason.contains("symbolic link"),
            "{found:?}"
        );
    }
}

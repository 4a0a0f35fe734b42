//! A path as the kernel will open it: against the directory it is written in, `~`
//! expanded, `..` and symlinks followed (a symlink before a `..` is followed first, as
//! the kernel does), the parts that do not exist yet kept as written.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// How many symlinks one path may pass through (Linux's own bound is 40).
const MAX_LINKS: usize = 40;

/// Characters a shell expands before the program sees the path: a path holding one is not
/// the path that will be opened.
const EXPANDED: [char; 7] = ['$', '`', '*', '?', '[', '{', '\0'];

/// `path` resolved against `cwd` (an absolute directory) and `home`; `None` when the
/// static reading cannot know it: empty, expanded by the shell (`$X`, a glob, `~user`),
/// relative with no directory known, or through too many symlinks.
pub fn resolve(path: &str, cwd: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    if path.is_empty() || path.contains(EXPANDED) {
        return None;
    }
    let start = if path == "~" {
        home?.to_path_buf()
    } else if let Some(rest) = path.strip_prefix("~/") {
        home?.join(rest)
    } else if path.starts_with('~') {
        return None;
    } else if Path::new(path).is_absolute() {
        PathBuf::from(path)
    } else {
        cwd?.join(path)
    };
    if !start.is_absolute() {
        return None;
    }
    physical(&start)
}

/// `path` (absolute) with every symlink that exists on it followed, part by part.
fn physical(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    let mut pending: VecDeque<OsString> = parts(path).collect();
    let mut links = 0;
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&part);
        let is_link = std::fs::symlink_metadata(&next).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            out = next;
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return None;
        }
        let target = std::fs::read_link(&next).ok()?;
        if target.is_absolute() {
            out = PathBuf::from("/");
        }
        for (i, part) in parts(&target).enumerate() {
            pending.insert(i, part);
        }
    }
    Some(out)
}

/// The parts of a path that name something (`.` dropped, `..` kept as `..`).
fn parts(path: &Path) -> impl Iterator<Item = OsString> + '_ {
    path.components().filter_map(|component| match component {
        Component::Normal(part) => Some(part.to_os_string()),
        Component::ParentDir => Some(OsString::from("..")),
        Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_home_dots_and_symlinks_are_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::os::unix::fs::symlink(root.join(".claude"), root.join("notes")).unwrap();
        std::os::unix::fs::symlink("../.claude/settings.json", root.join("src/link")).unwrap();
        let at = |path: &str| resolve(path, Some(&root), Some(Path::new("/home/me")));
        assert_eq!(at("a/b"), Some(root.join("a/b")));
        assert_eq!(at("src/../.claude/x"), Some(root.join(".claude/x")));
        assert_eq!(
            at("notes/settings.json"),
            Some(root.join(".claude/settings.json"))
        );
        // A dangling link's target is what a write creates.
        assert_eq!(at("src/link"), Some(root.join(".claude/settings.json")));
        // `notes/..` is the parent of what `notes` points to, as the kernel reads it.
        assert_eq!(at("notes/../src"), Some(root.join("src")));
        assert_eq!(
            at("~/.claude.json"),
            Some(PathBuf::from("/home/me/.claude.json"))
        );
        for unknown in ["", "$HOME/x", "*.json", "~root/x", "`pwd`/x"] {
            assert_eq!(at(unknown), None, "{unknown}");
        }
        assert_eq!(resolve("x", None, None), None);
    }

    #[test]
    fn a_symlink_loop_is_unresolved() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::os::unix::fs::symlink(root.join("b"), root.join("a")).unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("b")).unwrap();
        assert_eq!(resolve("a/x", Some(&root), None), None);
    }
}

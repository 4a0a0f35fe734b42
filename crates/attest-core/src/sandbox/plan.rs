//! Which paths the sandbox makes read-only or hides: the protected set, made concrete for
//! one project and one home directory.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::protected::{ProtectedSet, PROTECTED_CHILDREN, PROTECTED_DIRS, PROTECTED_NAMES};

/// What the sandbox does to the file system.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SandboxPlan {
    /// Existing paths made read-only (resolved: a protected symlink's target).
    pub read_only: Vec<PathBuf>,
    /// Directories covered by an empty, read-only view (Attest's state).
    pub hidden: Vec<PathBuf>,
    /// Protected paths that do not exist now: nothing to mount over, so the sandbox does
    /// not cover them (the hook's reading still refuses writes to them).
    pub absent: Vec<PathBuf>,
}

impl SandboxPlan {
    /// The plan for a command run in `project`: each fixed protected name in the project
    /// and in the home directory, and every file and state directory the running
    /// configuration uses.
    pub fn new(set: &ProtectedSet, project: &Path) -> SandboxPlan {
        let mut candidates = Vec::new();
        // The agents' own folders and files, in the project and in the home directory;
        // the repository's hooks, CI and editor settings in the project only.
        for base in std::iter::once(project).chain(set.home()) {
            candidates.extend(PROTECTED_DIRS.iter().map(|dir| base.join(dir)));
            candidates.extend(PROTECTED_NAMES.iter().map(|name| base.join(name)));
        }
        for (dir, children) in PROTECTED_CHILDREN {
            candidates.extend(children.iter().map(|child| project.join(dir).join(child)));
        }
        let (files, dirs) = set.configured();
        candidates.extend(files.iter().cloned());
        // A SQLite ledger's companions are the ledger too.
        for file in files {
            for suffix in ["-wal", "-shm", "-journal"] {
                let mut companion = file.clone().into_os_string();
                companion.push(suffix);
                candidates.push(PathBuf::from(companion));
            }
        }

        let mut plan = SandboxPlan::default();
        for dir in dirs {
            match std::fs::canonicalize(dir) {
                Ok(real) if real.is_dir() => plan.hidden.push(real),
                _ => plan.absent.push(dir.clone()),
            }
        }
        for path in candidates {
            match std::fs::canonicalize(&path) {
                Ok(real) => plan.read_only.push(real),
                // A companion file that is not there is not a gap worth naming.
                Err(_) if is_companion(&path) => {}
                Err(_) => plan.absent.push(path),
            }
        }
        plan.read_only.sort();
        plan.read_only.dedup();
        // A path beneath one already read-only (or hidden) needs no mount of its own.
        let covered: Vec<PathBuf> = plan.read_only.iter().chain(&plan.hidden).cloned().collect();
        plan.read_only.retain(|path| {
            !covered
                .iter()
                .any(|other| other != path && path.starts_with(other))
        });
        plan.absent.sort();
        plan.absent.dedup();
        plan
    }
}

fn is_companion(path: &Path) -> bool {
    path.to_str()
        .is_some_and(|p| p.ends_with("-wal") || p.ends_with("-shm") || p.ends_with("-journal"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn existing_protected_paths_are_read_only_and_missing_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        let home = dir.path().join("home");
        std::fs::create_dir_all(project.join(".claude")).unwrap();
        std::fs::write(project.join(".claude/settings.json"), "{}").unwrap();
        std::fs::create_dir_all(project.join(".git/hooks")).unwrap();
        std::fs::write(project.join(".git/config"), "").unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join(".claude.json"), "{}").unwrap();
        std::fs::create_dir_all(project.join("rules")).unwrap();
        std::fs::write(project.join("rules/agents.yaml"), "").unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        let set = ProtectedSet::new(Some(home.clone()))
            .file(&project.join("rules/agents.yaml"))
            .dir(&state);

        let plan = SandboxPlan::new(&set, &project);

        let real = |p: PathBuf| std::fs::canonicalize(p).unwrap();
        for want in [
            real(project.join(".claude")),
            real(project.join(".git/hooks")),
            real(project.join(".git/config")),
            real(home.join(".claude.json")),
            real(project.join("rules/agents.yaml")),
        ] {
            assert!(plan.read_only.contains(&want), "{want:?} in {plan:?}");
        }
        // Covered by `.claude` itself: no mount of its own.
        assert!(!plan
            .read_only
            .contains(&real(project.join(".claude/settings.json"))));
        assert_eq!(plan.hidden, vec![real(state)]);
        assert!(plan.absent.contains(&project.join(".mcp.json")));
        assert!(!plan.read_only.iter().any(|p| p.ends_with("-wal")));
    }
}

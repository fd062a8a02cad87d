//! The repository's files as the tidy checks see them: the tree under the root,
//! `.gitignore` honoured, `.git` itself left out. Walked rather than asked of
//! git, so the checks run where there is no git and no `.git` (the Nix
//! sandbox, `.ci/sandbox-check`); in a checkout it is git's own list
//! (the test below).

use std::path::Path;

use labkit::project;

/// Every file under `root` that git would track or offer to track, sorted,
/// as `/`-separated paths relative to `root`.
pub(super) fn files(root: &Path) -> Vec<String> {
    let walk = ignore::WalkBuilder::new(root)
        // Only the repository's own .gitignore files: not a person's global
        // excludes, .git/info/exclude or .ignore files, which a copy lacks.
        .standard_filters(false)
        .git_ignore(true)
        .require_git(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    let mut files: Vec<String> = walk
        .map(|entry| entry.unwrap_or_else(|e| panic!("cannot walk {}: {e}", root.display())))
        .filter(|e| e.file_type().is_some_and(|t| !t.is_dir()))
        .map(|e| {
            let relative = e.path().strip_prefix(root).expect("under the root");
            relative.to_str().expect("UTF-8 path").replace('\\', "/")
        })
        .collect();
    files.sort();
    files
}

#[test]
fn the_walk_lists_what_git_tracks_or_would() {
    let root = project::root();
    if !root.join(".git").exists() {
        // A copy without .git (the Nix sandbox): there is no git to compare with,
        // and the filter of flake.nix's checks.tests leaves this test out by name.
        panic!("{} has no .git: this test compares the walk with git", root.display());
    }
    let root_arg = root.display().to_string();
    // Tracked files and untracked ones no .gitignore excludes, with only the
    // .gitignore files as excludes (what the walk honours).
    let listing = labkit::command::Cmd::argv([
        "git",
        "-C",
        &root_arg,
        "ls-files",
        "--cached",
        "--others",
        "--exclude-per-directory=.gitignore",
    ])
    .read()
    .expect("git ls-files");
    let mut git: Vec<String> = listing
        .lines()
        // A tracked file deleted in the work tree is still in git's index.
        .filter(|f| root.join(f).symlink_metadata().is_ok())
        .map(str::to_string)
        .collect();
    git.sort();
    git.dedup();
    let walked = files(&root);
    let only_git: Vec<&String> = git.iter().filter(|f| walked.binary_search(f).is_err()).collect();
    let only_walk: Vec<&String> = walked.iter().filter(|f| git.binary_search(f).is_err()).collect();
    assert!(
        only_git.is_empty() && only_walk.is_empty(),
        "the walk and git ls-files differ: only git {only_git:?}, only the walk {only_walk:?}"
    );
    assert!(walked.len() > 100, "{} files: not the whole tree", walked.len());
}

//! Go programs the kit runs from Go modules of its own (the course's
//! controller as the bench's peer and as the grader's proof, and its broken
//! variants): built with `go build` once per change of their sources, into
//! `target/go/<name>-<fingerprint>`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use labkit::{command::Cmd, fingerprint::sha256_hex, project};

/// The module's files that decide the build.
const SOURCES: [&str; 3] = ["go.mod", "go.sum", "main.go"];

/// A copy of the module in `dir` (relative to the repository), made afresh
/// in `target/go/<name>.module`: for `go run .`, which builds in the folder
/// it is run in and leaves the module as it is.
pub fn module_copy(name: &str, dir: &str) -> anyhow::Result<PathBuf> {
    let dir = project::root().join(dir);
    let copy = project::target_dir().join("go").join(format!("{name}.module"));
    std::fs::create_dir_all(&copy).with_context(|| format!("cannot create {}", copy.display()))?;
    for file in SOURCES {
        std::fs::copy(dir.join(file), copy.join(file))
            .with_context(|| format!("cannot copy {file} of {}", dir.display()))?;
    }
    Ok(copy)
}

/// Builds the module in `dir` (relative to the repository), with `patch`
/// applied first when given (a unified diff of its `main.go`); returns the
/// binary. Built again only when the sources or the patch change.
pub fn build(name: &str, dir: &str, patch: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = project::root().join(dir);
    let mut inputs = Vec::new();
    for file in SOURCES.iter().map(|f| dir.join(f)).chain(patch.map(Path::to_path_buf)) {
        inputs.extend(
            std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?,
        );
    }
    let out = project::target_dir().join("go");
    let binary = out.join(format!("{name}-{}", &sha256_hex(&inputs)[..12]));
    if binary.is_file() {
        return Ok(binary);
    }
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    // A copy to patch and build in; the module itself stays as it is. Named after this
    // process: two test runs may build the same program at once.
    let work = out.join(format!("{name}.src.{}", std::process::id()));
    if work.exists() {
        std::fs::remove_dir_all(&work)
            .with_context(|| format!("cannot remove {}", work.display()))?;
    }
    std::fs::create_dir_all(&work)?;
    for file in SOURCES {
        std::fs::copy(dir.join(file), work.join(file))
            .with_context(|| format!("cannot copy {file} of {}", dir.display()))?;
    }
    if let Some(patch) = patch {
        Cmd::argv(["git", "apply"]).path(patch).dir(&work).run()?;
    }
    let partial = binary.with_extension(format!("partial.{}", std::process::id()));
    // Without -trimpath, as `go run` builds: the grader's `go run` of the course's module
    // (xtask/tests/grade.rs) then reuses these compiles of client-go in Go's build cache
    // instead of making its own, minutes of CPU on a cold machine.
    Cmd::argv(["go", "build", "-o"])
        .path(&partial)
        .arg(".")
        .dir(&work)
        .run_long(&format!("building {name} with Go"))
        .with_context(|| format!("go build of {name} failed (its output is above)"))?;
    std::fs::rename(&partial, &binary)
        .with_context(|| format!("cannot move {}", partial.display()))?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(binary)
}

//! The envtest provider's two programs, kube-apiserver and etcd: found, built with Go, or
//! downloaded.
//!
//! Search order, for each program on its own:
//! 1. `KUBE_APISERVER` / `ETCD`: an explicit path (an error when it does not exist);
//! 2. `KUBEBUILDER_ASSETS`: a directory holding both (what `setup-envtest` prints);
//! 3. `PATH`;
//! 4. the project cache `target/envtest/<kubernetes>/kube-apiserver` and
//!    `target/envtest/<kubernetes>/etcd-<etcd>/etcd`, keyed by the versions the Go modules pin;
//! 5. a `go build` of the modules in `xtask/envtest/`, written into that cache;
//! 6. the official release binaries (dl.k8s.io, etcd's GitHub releases), checked against
//!    their published sha256 and written into that cache — only where the network allows,
//!    and only when step 5 did not happen or failed (see [`find_one`]).
//!
//! The versions are read from the go.mod files, so they are written down once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use xshell::{Shell, cmd};

use crate::cmdline;
use e2e::command::Cmd;
use e2e::process;
use e2e::project;

/// The Go modules that pin both programs; included so the versions cannot drift from them.
const KUBE_APISERVER_GO_MOD: &str = include_str!("../../envtest/kubernetes/go.mod");
const ETCD_GO_MOD: &str = include_str!("../../envtest/etcd/go.mod");
/// The module whose version is the Kubernetes version, and the package that is kube-apiserver.
const KUBERNETES_MODULE: &str = "k8s.io/kubernetes";
const KUBE_APISERVER_PACKAGE: &str = "k8s.io/kubernetes/cmd/kube-apiserver";
const ETCD_MODULE: &str = "go.etcd.io/etcd/server/v3";

/// The versions the Go modules pin, e.g. `v1.36.3` and `v3.6.16`.
#[derive(Clone, Debug)]
pub struct Pins {
    pub kubernetes: String,
    pub etcd: String,
}

impl Pins {
    pub fn from_go_mods() -> Result<Pins> {
        Ok(Pins {
            kubernetes: required_version(KUBE_APISERVER_GO_MOD, KUBERNETES_MODULE)
                .context("xtask/envtest/kubernetes/go.mod")?,
            etcd: required_version(ETCD_GO_MOD, ETCD_MODULE)
                .context("xtask/envtest/etcd/go.mod")?,
        })
    }

    /// `v1.36.3` → `v1.36.`: any patch release of the pinned minor is fine to use.
    fn kubernetes_minor_prefix(&self) -> String {
        minor_prefix(&self.kubernetes)
    }

    fn cache_dir(&self) -> PathBuf {
        project::target_dir().join("envtest").join(&self.kubernetes)
    }
}

/// Where a program was found; shown to the person and recorded in lab.json.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Env(&'static str),
    KubebuilderAssets,
    Path,
    Cache,
    Built,
    Downloaded,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Env(var) => write!(f, "${var}"),
            Source::KubebuilderAssets => write!(f, "$KUBEBUILDER_ASSETS"),
            Source::Path => write!(f, "PATH"),
            Source::Cache => write!(f, "project cache"),
            Source::Built => write!(f, "built with go"),
            Source::Downloaded => write!(f, "download"),
        }
    }
}

/// One program, ready to run.
#[derive(Clone, Debug)]
pub struct Binary {
    pub path: PathBuf,
    /// As the program reports it (`--version`), e.g. `v1.36.3` or `3.6.16`.
    pub version: String,
    pub source: Source,
}

#[derive(Clone, Debug)]
pub struct EnvtestBinaries {
    pub kube_apiserver: Binary,
    pub etcd: Binary,
}

/// Find both programs (building what is missing); see the module docs for the order.
pub async fn find(sh: &Shell) -> Result<EnvtestBinaries> {
    let pins = Pins::from_go_mods()?;
    let kube_apiserver = find_one(sh, &Program::kube_apiserver(&pins)).await?;
    let etcd = find_one(sh, &Program::etcd(&pins)).await?;
    Ok(EnvtestBinaries { kube_apiserver, etcd })
}

/// What differs between the two programs.
struct Program {
    name: &'static str,
    env: &'static str,
    /// The version the pinned module builds, as the program prints it.
    pinned_version: String,
    /// A version starting with this is close enough not to warn about.
    accepted_prefix: String,
    cache_path: PathBuf,
    go_module_dir: PathBuf,
    /// `go build` arguments after `-o OUT`.
    go_package: &'static str,
    ldflags: String,
    /// The official release for this machine, or why there is none.
    release: std::result::Result<Release, String>,
}

impl Program {
    fn kube_apiserver(pins: &Pins) -> Program {
        let minor = pins
            .kubernetes_minor_prefix()
            .trim_start_matches("v1.")
            .trim_end_matches('.')
            .to_string();
        Program {
            name: "kube-apiserver",
            env: "KUBE_APISERVER",
            pinned_version: pins.kubernetes.clone(),
            accepted_prefix: pins.kubernetes_minor_prefix(),
            cache_path: pins.cache_dir().join("kube-apiserver"),
            go_module_dir: project::root().join("xtask/envtest/kubernetes"),
            go_package: KUBE_APISERVER_PACKAGE,
            // Built from a module, kube-apiserver does not know its version: stamp it, or
            // `/version` says v0.0.0 and clients warn about skew.
            ldflags: format!(
                "-s -w -X k8s.io/component-base/version.gitVersion={} \
                 -X k8s.io/component-base/version.gitMajor=1 \
                 -X k8s.io/component-base/version.gitMinor={minor}",
                pins.kubernetes
            ),
            release: this_platform().map(|arch| Release::kube_apiserver(&pins.kubernetes, arch)),
        }
    }

    fn etcd(pins: &Pins) -> Program {
        Program {
            name: "etcd",
            env: "ETCD",
            // etcd prints its version without the module's `v`.
            pinned_version: pins.etcd.trim_start_matches('v').to_string(),
            accepted_prefix: minor_prefix(&pins.etcd).trim_start_matches('v').to_string(),
            cache_path: pins.cache_dir().join(format!("etcd-{}", pins.etcd)).join("etcd"),
            go_module_dir: project::root().join("xtask/envtest/etcd"),
            go_package: ".",
            ldflags: "-s -w".to_string(),
            release: this_platform().map(|arch| Release::etcd(&pins.etcd, arch)),
        }
    }

    /// `kube-apiserver --version` → `Kubernetes v1.36.3`; `etcd --version` → `etcd Version: 3.6.16`.
    fn version_of(&self, sh: &Shell, path: &Path) -> Result<String> {
        let output = cmdline::read(&cmd!(sh, "{path} --version"))
            .with_context(|| format!("`{} --version` failed", path.display()))?;
        let version = match self.name {
            "kube-apiserver" => {
                output.split_whitespace().find(|word| word.starts_with('v')).map(str::to_string)
            }
            _ => output
                .lines()
                .find_map(|line| line.strip_prefix("etcd Version:"))
                .map(|version| version.trim().to_string()),
        };
        version
            .ok_or_else(|| anyhow!("`{} --version` printed no version: {output:?}", path.display()))
    }
}

async fn find_one(sh: &Shell, program: &Program) -> Result<Binary> {
    // 1. An explicit path: the person asked for this one, so a wrong path is an error.
    if let Some(path) = env_path(program.env) {
        if !path.is_file() {
            bail!(
                "{}={} does not exist (unset it to let xtask look elsewhere)",
                program.env,
                path.display()
            );
        }
        return checked(sh, program, path, Source::Env(program.env));
    }
    // 2. A kubebuilder-style assets directory.
    if let Some(dir) = env_path("KUBEBUILDER_ASSETS") {
        let path = dir.join(program.name);
        if path.is_file() {
            return checked(sh, program, path, Source::KubebuilderAssets);
        }
        eprintln!(
            "note: KUBEBUILDER_ASSETS={} has no {}; looking further",
            dir.display(),
            program.name
        );
    }
    // 3. PATH. A program there that does not even run is skipped, not fatal.
    if let Some(path) = on_path(program.name) {
        match checked(sh, program, path.clone(), Source::Path) {
            Ok(binary) => return Ok(binary),
            Err(error) => eprintln!("warning: skipping {}: {error:#}", path.display()),
        }
    }
    // 4. The project cache: only complete builds are ever renamed into it.
    if program.cache_path.is_file() {
        return checked(sh, program, program.cache_path.clone(), Source::Cache);
    }
    // 5. Build it from the pinned modules: the way that needs no network beyond the Go
    //    module proxy, and the one the versions are defined by.
    let mut go_build = "not tried: go is not on PATH".to_string();
    if on_path("go").is_some() {
        match build(program).await {
            Ok(()) => return checked(sh, program, program.cache_path.clone(), Source::Built),
            // A failed build is usually the machine (memory, disk, no module proxy), not the
            // code: the official release of the same version is as good, so try it before
            // giving up. The build's own output is above.
            Err(error) => {
                eprintln!("warning: {error:#}; trying the official release binary instead");
                go_build = format!("tried: {error:#}");
            }
        }
    }
    // 6. Download the official release, when the network allows. A checksum mismatch or a
    //    cache that cannot be written is an error; a download that cannot happen (no
    //    network, no curl, another platform) falls through to the message below.
    let download = match download(sh, program)? {
        Downloaded::Yes => {
            return checked(sh, program, program.cache_path.clone(), Source::Downloaded);
        }
        Downloaded::No(reason) => reason,
    };
    Err(anyhow!(
        "{name} {version} not found. Any one of these provides it:\n  \
         - {env}=/path/to/{name}\n  \
         - KUBEBUILDER_ASSETS=/dir/with/kube-apiserver/and/etcd (what setup-envtest prints)\n  \
         - {name} on PATH\n  \
         - a copy at {cache}\n  \
         - Go (see xtask/envtest/{name}/go.mod for the version) on PATH: xtask then builds it \
           into the cache ({go_build})\n  \
         - curl and access to {url}: xtask then downloads the official release into the cache \
           ({download})",
        name = program.name,
        version = program.pinned_version,
        env = program.env,
        cache = program.cache_path.display(),
        url = match &program.release {
            Ok(release) => release.url.as_str(),
            Err(_) => "an official release for this machine",
        },
    ))
}

/// Run `--version`, warn when it is not the pinned minor.
fn checked(sh: &Shell, program: &Program, path: PathBuf, source: Source) -> Result<Binary> {
    let path = std::path::absolute(&path).unwrap_or(path);
    let version = program.version_of(sh, &path)?;
    if !version.starts_with(&program.accepted_prefix) {
        eprintln!(
            "warning: {} ({source}) is {version}; this kit pins {} ({}*)",
            path.display(),
            program.pinned_version,
            program.accepted_prefix
        );
    }
    Ok(Binary { path, version, source })
}

/// The directory of `program`'s cache entry, created, with leftovers of
/// interrupted builds and downloads removed.
fn prepare_cache_dir(program: &Program) -> Result<PathBuf> {
    let cache_dir = program.cache_path.parent().context("cache path has no parent")?;
    std::fs::create_dir_all(cache_dir)
        .with_context(|| format!("cannot create {}", cache_dir.display()))?;
    remove_abandoned_partials(cache_dir, program.name);
    Ok(cache_dir.to_path_buf())
}

/// `go build` into a temporary file next to the cache entry, renamed when complete: an
/// interrupted build never looks like a cached one.
async fn build(program: &Program) -> Result<()> {
    let cache_dir = prepare_cache_dir(program)?;
    let cache_dir = cache_dir.as_path();
    let partial = cache_dir.join(format!(".{}.partial-{}", program.name, std::process::id()));
    // Static, as the official releases (and the kind node image's builds,
    // which then share Go's build cache with this one).
    let build = Cmd::argv(["go", "build", "-trimpath", "-ldflags", &program.ldflags, "-o"])
        .path(&partial)
        .arg(program.go_package)
        .env("CGO_ENABLED", "0")
        .dir(&program.go_module_dir);
    eprintln!(
        "{} {} is not available: building it with Go{}",
        program.name,
        program.pinned_version,
        if program.name == "kube-apiserver" {
            " (the first build takes many minutes on a small machine)"
        } else {
            ""
        }
    );
    eprintln!("$ {build}");
    let start = Instant::now();
    let mut child = tokio::process::Command::from(build.to_command()?)
        .kill_on_drop(true)
        .spawn()
        .context("cannot start go")?;
    let mut heartbeat = tokio::time::interval(Duration::from_secs(30));
    heartbeat.tick().await;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status.context("waiting for go build")?,
            _ = heartbeat.tick() => eprintln!(
                "  still building {} ({}s)", program.name, start.elapsed().as_secs()
            ),
        }
    };
    if !status.success() {
        let _ = std::fs::remove_file(&partial);
        bail!("go build of {} failed ({status}); the command is shown above", program.name);
    }
    std::fs::rename(&partial, &program.cache_path).with_context(|| {
        format!("cannot move {} to {}", partial.display(), program.cache_path.display())
    })?;
    eprintln!(
        "  built {} in {}s: {}",
        program.name,
        start.elapsed().as_secs(),
        program.cache_path.display()
    );
    Ok(())
}

/// Where the official release of a program is published, for one architecture.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Release {
    /// The file to download: the program itself, or an archive holding it.
    url: String,
    checksum: Checksum,
    /// For an archive: the program's path inside it.
    member: Option<String>,
}

/// Where a release file's sha256 is published.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Checksum {
    /// A file holding just the hex digest (dl.k8s.io's `<file>.sha256`).
    Digest { url: String },
    /// A `SHA256SUMS` file: lines `<hex>  <file name>` (etcd's releases).
    Sums { url: String, file_name: String },
}

impl Release {
    /// `https://dl.k8s.io/release/v1.36.3/bin/linux/amd64/kube-apiserver` (+ `.sha256`).
    fn kube_apiserver(version: &str, arch: &str) -> Release {
        let url = format!("https://dl.k8s.io/release/{version}/bin/linux/{arch}/kube-apiserver");
        Release { checksum: Checksum::Digest { url: format!("{url}.sha256") }, url, member: None }
    }

    /// `etcd-v3.6.16-linux-amd64.tar.gz` from etcd's GitHub release, holding
    /// `etcd-v3.6.16-linux-amd64/etcd`; its digest is in the release's `SHA256SUMS`.
    fn etcd(version: &str, arch: &str) -> Release {
        let base = format!("https://github.com/etcd-io/etcd/releases/download/{version}");
        let stem = format!("etcd-{version}-linux-{arch}");
        let file_name = format!("{stem}.tar.gz");
        Release {
            url: format!("{base}/{file_name}"),
            checksum: Checksum::Sums { url: format!("{base}/SHA256SUMS"), file_name },
            member: Some(format!("{stem}/etcd")),
        }
    }

    /// The downloaded file's name: the URL's last segment.
    fn file_name(&self) -> &str {
        self.url.rsplit('/').next().unwrap_or(&self.url)
    }
}

/// The release architecture for this machine (`amd64`, `arm64`), or why there is none.
fn this_platform() -> std::result::Result<&'static str, String> {
    release_arch(std::env::consts::OS, std::env::consts::ARCH)
}

fn release_arch(os: &str, arch: &str) -> std::result::Result<&'static str, String> {
    match (os, arch) {
        ("linux", "x86_64") => Ok("amd64"),
        ("linux", "aarch64") => Ok("arm64"),
        _ => Err(format!(
            "not tried: this kit downloads linux/amd64 and linux/arm64 only, this is {os}/{arch}"
        )),
    }
}

/// What [`download`] did when nothing was wrong with what it got.
#[derive(Debug)]
enum Downloaded {
    Yes,
    /// It could not happen (no network, no curl, another platform): one line, why.
    No(String),
}

/// Download the official release into the cache, checked against its published sha256.
///
/// Everything is fetched into a scratch directory next to the cache entry, and only the
/// checked program is renamed into place: an interrupted download never looks like a cached
/// one (and its scratch directory is removed by a later run, as an interrupted build's file).
/// Checksum mismatches, malformed checksum files and an unwritable cache are errors.
fn download(sh: &Shell, program: &Program) -> Result<Downloaded> {
    let release = match &program.release {
        Ok(release) => release,
        Err(reason) => return Ok(Downloaded::No(reason.clone())),
    };
    let mut tools = vec!["curl", "sha256sum"];
    if release.member.is_some() {
        tools.push("tar");
    }
    if let Some(missing) = tools.iter().find(|tool| on_path(tool).is_none()) {
        return Ok(Downloaded::No(format!("not tried: {missing} is not on PATH")));
    }

    let cache_dir = prepare_cache_dir(program)?;
    let cache_dir = cache_dir.as_path();
    let scratch =
        Scratch(cache_dir.join(format!(".{}.download-{}", program.name, std::process::id())));
    std::fs::create_dir_all(&scratch.0)
        .with_context(|| format!("cannot create {}", scratch.0.display()))?;

    eprintln!(
        "{} {} is not available: downloading the official release",
        program.name, program.pinned_version
    );
    let start = Instant::now();
    // The small checksum file first: without network, this is where it stops.
    let expected = match &release.checksum {
        Checksum::Digest { url } => {
            let file = scratch.0.join(format!("{}.sha256", release.file_name()));
            if let Err(reason) = curl(sh, url, &file)? {
                return Ok(Downloaded::No(reason));
            }
            parse_digest(&read_text(&file)?).with_context(|| format!("in {url}"))?
        }
        Checksum::Sums { url, file_name } => {
            let file = scratch.0.join("SHA256SUMS");
            if let Err(reason) = curl(sh, url, &file)? {
                return Ok(Downloaded::No(reason));
            }
            digest_in_sums(&read_text(&file)?, file_name).with_context(|| format!("in {url}"))?
        }
    };
    let file = scratch.0.join(release.file_name());
    if let Err(reason) = curl(sh, &release.url, &file)? {
        return Ok(Downloaded::No(reason));
    }
    verify_sha256(sh, &file, &expected).with_context(|| format!("{} refused", release.url))?;

    let program_file = match &release.member {
        None => file,
        Some(member) => {
            let dir = scratch.0.join("extracted");
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            cmd!(sh, "tar -xzf {file} -C {dir} {member}")
                .run()
                .with_context(|| format!("cannot extract {member} from {}", release.url))?;
            dir.join(member)
        }
    };
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program_file, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot chmod {}", program_file.display()))?;
    }
    std::fs::rename(&program_file, &program.cache_path).with_context(|| {
        format!("cannot move {} to {}", program_file.display(), program.cache_path.display())
    })?;
    eprintln!(
        "  downloaded {} in {:.1}s (sha256 {expected}): {}",
        program.name,
        start.elapsed().as_secs_f64(),
        program.cache_path.display()
    );
    Ok(Downloaded::Yes)
}

/// A download's scratch directory, removed however the download ends (short of a kill).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `curl -fsSL …`, echoed. `Ok(Err(reason))` when the transfer failed: curl's own last
/// line of complaint (`curl: (7) Failed to connect …`), for the person.
fn curl(sh: &Shell, url: &str, out: &Path) -> Result<std::result::Result<(), String>> {
    let curl = cmd!(sh, "curl -fsSL --retry 2 --connect-timeout 10 -o {out} {url}").ignore_status();
    eprintln!("$ {curl}");
    let output = curl.output().context("cannot run curl")?;
    if output.status.success() {
        return Ok(Ok(()));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let complaint = stderr
        .lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty())
        .map_or_else(|| format!("curl {}", output.status), str::to_string);
    Ok(Err(format!("failed: {complaint} ({url})")))
}

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// A `.sha256` file: the hex digest alone (a `<hex>  <name>` line is accepted too).
fn parse_digest(text: &str) -> Result<String> {
    let digest = text.split_whitespace().next().unwrap_or_default();
    checked_digest(digest).ok_or_else(|| anyhow!("not a sha256 digest: {:?}", text.trim()))
}

/// The digest of `file_name` in a `SHA256SUMS` file (`<hex>  <name>`, or `<hex> *<name>`).
fn digest_in_sums(sums: &str, file_name: &str) -> Result<String> {
    sums.lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            let (digest, name) = (words.next()?, words.next()?);
            (name.trim_start_matches('*') == file_name).then_some(digest)
        })
        .ok_or_else(|| anyhow!("no line for {file_name}"))
        .and_then(|digest| {
            checked_digest(digest)
                .ok_or_else(|| anyhow!("not a sha256 digest for {file_name}: {digest:?}"))
        })
}

/// 64 hex digits, lowercased.
fn checked_digest(digest: &str) -> Option<String> {
    (digest.len() == 64 && digest.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| digest.to_ascii_lowercase())
}

/// `sha256sum FILE` (echoed) must print `expected`; on a mismatch the file is deleted.
fn verify_sha256(sh: &Shell, path: &Path, expected: &str) -> Result<()> {
    let output = cmdline::read(&cmd!(sh, "sha256sum {path}"))
        .with_context(|| format!("cannot checksum {}", path.display()))?;
    let actual = output.split_whitespace().next().unwrap_or_default();
    if !actual.eq_ignore_ascii_case(expected) {
        let _ = std::fs::remove_file(path);
        bail!(
            "sha256 mismatch: the published checksum is {expected}, the download's is {actual}; \
             it was deleted, nothing was cached"
        );
    }
    Ok(())
}

/// Leftovers of builds and downloads that were interrupted (their xtask is gone): a build's
/// `.<name>.partial-<pid>` file, a download's `.<name>.download-<pid>` directory. Those of a
/// build or download still running in another terminal are kept.
fn remove_abandoned_partials(cache_dir: &Path, name: &str) {
    let prefixes = [format!(".{name}.partial-"), format!(".{name}.download-")];
    let Ok(entries) = std::fs::read_dir(cache_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|file_name| {
                prefixes.iter().find_map(|prefix| file_name.strip_prefix(prefix.as_str()))
            })
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !process::is_alive(pid) {
            let path = entry.path();
            eprintln!("  removing {} (left by an interrupted build or download)", path.display());
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).filter(|value| !value.is_empty()).map(PathBuf::from)
}

/// The first executable file called `name` in `PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| {
        candidate
            .metadata()
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    })
}

/// The version a go.mod requires `module` at (`require` line or block; not `replace`).
fn required_version(go_mod: &str, module: &str) -> Result<String> {
    go_mod
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default().trim())
        .map(|line| line.strip_prefix("require ").unwrap_or(line).trim())
        .find_map(|line| {
            let mut words = line.split_whitespace();
            let (name, version) = (words.next()?, words.next()?);
            (name == module && version.starts_with('v')).then(|| version.to_string())
        })
        .ok_or_else(|| anyhow!("no `require {module} vX.Y.Z`"))
}

/// `v1.36.3` → `v1.36.`
fn minor_prefix(version: &str) -> String {
    let mut parts = version.splitn(3, '.');
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}."),
        _ => version.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_the_go_modules() {
        let pins = Pins::from_go_mods().unwrap();
        assert!(pins.kubernetes.starts_with("v1."), "{pins:?}");
        assert!(pins.etcd.starts_with("v3."), "{pins:?}");
    }

    #[test]
    fn require_block_and_line_are_read_but_replace_is_not() {
        let go_mod = "module x\n\nreplace k8s.io/api => k8s.io/api v0.36.3\n\
                      require go.etcd.io/etcd/server/v3 v3.6.16\n\
                      require (\n\tk8s.io/api v0.0.0\n\tk8s.io/kubernetes v1.36.3 // indirect\n)\n";
        assert_eq!(required_version(go_mod, "k8s.io/kubernetes").unwrap(), "v1.36.3");
        assert_eq!(required_version(go_mod, "go.etcd.io/etcd/server/v3").unwrap(), "v3.6.16");
        assert_eq!(required_version(go_mod, "k8s.io/api").unwrap(), "v0.0.0");
        assert!(required_version(go_mod, "example.com/none").is_err());
    }

    #[test]
    fn only_partials_of_dead_builds_are_removed() {
        let dir = std::env::temp_dir().join(format!("xtask-partials-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Above any pid_max, so never a running process.
        let dead = dir.join(".etcd.partial-4294967295");
        let running = dir.join(format!(".etcd.partial-{}", std::process::id()));
        let other = dir.join(".kube-apiserver.partial-4294967295");
        for file in [&dead, &running, &other] {
            std::fs::write(file, b"").unwrap();
        }
        let dead_download = dir.join(".etcd.download-4294967295");
        let running_download = dir.join(format!(".etcd.download-{}", std::process::id()));
        for download in [&dead_download, &running_download] {
            std::fs::create_dir_all(download).unwrap();
            std::fs::write(download.join("SHA256SUMS"), b"").unwrap();
        }
        remove_abandoned_partials(&dir, "etcd");
        assert!(!dead.exists());
        assert!(running.exists());
        assert!(other.exists());
        assert!(!dead_download.exists());
        assert!(running_download.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn minor_prefix_keeps_major_and_minor() {
        assert_eq!(minor_prefix("v1.36.3"), "v1.36.");
        assert_eq!(minor_prefix("v3.6.16"), "v3.6.");
    }

    #[test]
    fn release_urls_for_both_programs_and_arches() {
        for arch in ["amd64", "arm64"] {
            let release = Release::kube_apiserver("v1.36.3", arch);
            assert_eq!(
                release.url,
                format!("https://dl.k8s.io/release/v1.36.3/bin/linux/{arch}/kube-apiserver")
            );
            assert_eq!(
                release.checksum,
                Checksum::Digest {
                    url: format!(
                        "https://dl.k8s.io/release/v1.36.3/bin/linux/{arch}/kube-apiserver.sha256"
                    )
                }
            );
            assert_eq!(release.member, None);
            assert_eq!(release.file_name(), "kube-apiserver");

            let release = Release::etcd("v3.6.16", arch);
            let base = "https://github.com/etcd-io/etcd/releases/download/v3.6.16";
            assert_eq!(release.url, format!("{base}/etcd-v3.6.16-linux-{arch}.tar.gz"));
            assert_eq!(
                release.checksum,
                Checksum::Sums {
                    url: format!("{base}/SHA256SUMS"),
                    file_name: format!("etcd-v3.6.16-linux-{arch}.tar.gz"),
                }
            );
            assert_eq!(
                release.member.as_deref(),
                Some(format!("etcd-v3.6.16-linux-{arch}/etcd").as_str())
            );
            assert_eq!(release.file_name(), format!("etcd-v3.6.16-linux-{arch}.tar.gz"));
        }
    }

    #[test]
    fn only_linux_amd64_and_arm64_are_downloaded() {
        assert_eq!(release_arch("linux", "x86_64"), Ok("amd64"));
        assert_eq!(release_arch("linux", "aarch64"), Ok("arm64"));
        for (os, arch) in [("macos", "aarch64"), ("linux", "riscv64"), ("windows", "x86_64")] {
            let reason = release_arch(os, arch).unwrap_err();
            assert!(reason.contains(&format!("{os}/{arch}")), "{reason}");
        }
    }

    const ABC_SHA256: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn digest_files_and_sha256sums_lines_are_parsed() {
        assert_eq!(parse_digest(&format!("{ABC_SHA256}\n")).unwrap(), ABC_SHA256);
        assert_eq!(parse_digest(&ABC_SHA256.to_ascii_uppercase()).unwrap(), ABC_SHA256);
        assert_eq!(parse_digest(&format!("{ABC_SHA256}  kube-apiserver\n")).unwrap(), ABC_SHA256);
        for bad in ["", "<html>Not Found</html>", &ABC_SHA256[1..], "z".repeat(64).as_str()] {
            assert!(parse_digest(bad).is_err(), "{bad:?}");
        }

        let other = "0".repeat(64);
        let sums = format!(
            "{other}  etcd-v3.6.16-darwin-arm64.zip\n\
             {other}  etcd-v3.6.16-linux-amd64.tar.gz.sig\n\
             {ABC_SHA256}  etcd-v3.6.16-linux-amd64.tar.gz\n\
             {other} *etcd-v3.6.16-linux-arm64.tar.gz\n\
             \n"
        );
        assert_eq!(digest_in_sums(&sums, "etcd-v3.6.16-linux-amd64.tar.gz").unwrap(), ABC_SHA256);
        assert_eq!(digest_in_sums(&sums, "etcd-v3.6.16-linux-arm64.tar.gz").unwrap(), other);
        assert!(digest_in_sums(&sums, "etcd-v3.6.16-linux-s390x.tar.gz").is_err());
        assert!(digest_in_sums("short  etcd.tar.gz\n", "etcd.tar.gz").is_err());
    }

    #[test]
    fn checksum_check_accepts_a_match_and_deletes_a_mismatch() {
        let sh = Shell::new().unwrap();
        let dir = std::env::temp_dir().join(format!("xtask-sha256-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("abc");
        std::fs::write(&file, b"abc").unwrap();

        verify_sha256(&sh, &file, ABC_SHA256).unwrap();
        verify_sha256(&sh, &file, &ABC_SHA256.to_ascii_uppercase()).unwrap();
        assert!(file.exists());

        let wrong = "0".repeat(64);
        let error = verify_sha256(&sh, &file, &wrong).unwrap_err().to_string();
        assert!(error.contains("mismatch"), "{error}");
        assert!(error.contains(&wrong) && error.contains(ABC_SHA256), "{error}");
        assert!(!file.exists(), "a file that fails the check is not kept");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The whole download of an archived program (curl, sha256sum, tar, rename), from
    /// `file://` URLs: no network. Skipped where those tools are missing.
    #[test]
    fn an_archive_is_downloaded_checked_extracted_and_cached() {
        if ["curl", "sha256sum", "tar"].iter().any(|tool| on_path(tool).is_none()) {
            eprintln!("skipped: needs curl, sha256sum and tar on PATH");
            return;
        }
        let sh = Shell::new().unwrap();
        let dir = std::env::temp_dir().join(format!("xtask-download-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let published = dir.join("published");
        std::fs::create_dir_all(published.join("etcd-v3.6.16-linux-amd64")).unwrap();
        std::fs::write(
            published.join("etcd-v3.6.16-linux-amd64/etcd"),
            "#!/bin/sh\necho 'etcd Version: 3.6.16'\n",
        )
        .unwrap();
        let tarball = published.join("etcd-v3.6.16-linux-amd64.tar.gz");
        cmd!(sh, "tar -czf {tarball} -C {published} etcd-v3.6.16-linux-amd64/etcd")
            .quiet()
            .run()
            .unwrap();
        let digest = cmd!(sh, "sha256sum {tarball}").read().unwrap();
        let digest = digest.split_whitespace().next().unwrap().to_string();

        let program_with_sums = |sums: String| {
            let sums_file = published.join("SHA256SUMS");
            std::fs::write(&sums_file, sums).unwrap();
            let mut release = Release::etcd("v3.6.16", "amd64");
            release.url = format!("file://{}", tarball.display());
            release.checksum = Checksum::Sums {
                url: format!("file://{}", sums_file.display()),
                file_name: "etcd-v3.6.16-linux-amd64.tar.gz".to_string(),
            };
            Program {
                name: "etcd",
                env: "ETCD",
                pinned_version: "3.6.16".to_string(),
                accepted_prefix: "3.6.".to_string(),
                cache_path: dir.join("cache/etcd-v3.6.16/etcd"),
                go_module_dir: dir.clone(),
                go_package: ".",
                ldflags: String::new(),
                release: Ok(release),
            }
        };
        let cache_dir = dir.join("cache/etcd-v3.6.16");

        // A mismatch is an error, and nothing is cached or left behind.
        let program =
            program_with_sums(format!("{}  etcd-v3.6.16-linux-amd64.tar.gz\n", "0".repeat(64)));
        let error = download(&sh, &program).unwrap_err();
        assert!(format!("{error:#}").contains("mismatch"), "{error:#}");
        assert!(!program.cache_path.exists());
        assert_eq!(std::fs::read_dir(&cache_dir).unwrap().count(), 0);

        // A missing file is a reason to look elsewhere, not an error.
        let mut program = program_with_sums(format!("{digest}  etcd-v3.6.16-linux-amd64.tar.gz\n"));
        let Ok(release) = &mut program.release else { unreachable!() };
        let real_url =
            std::mem::replace(&mut release.url, format!("file://{}/none", dir.display()));
        match download(&sh, &program).unwrap() {
            Downloaded::No(reason) => assert!(reason.starts_with("failed: curl"), "{reason}"),
            Downloaded::Yes => panic!("downloaded a file that does not exist"),
        }
        assert!(!program.cache_path.exists());

        // The real thing: checked, extracted, executable, cached; no scratch left.
        let Ok(release) = &mut program.release else { unreachable!() };
        release.url = real_url;
        assert!(matches!(download(&sh, &program).unwrap(), Downloaded::Yes));
        use std::os::unix::fs::PermissionsExt;
        let mode = program.cache_path.metadata().unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        assert_eq!(std::fs::read_dir(&cache_dir).unwrap().count(), 1);
        let binary =
            checked(&sh, &program, program.cache_path.clone(), Source::Downloaded).unwrap();
        assert_eq!(binary.version, "3.6.16");
        assert_eq!(binary.source.to_string(), "download");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

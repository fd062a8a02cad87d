//! Checks of the machine a lab runs on, each a pure function of what a probe
//! printed (so every pass/warn/fail path is unit-tested on recorded output),
//! plus the probes that gather that output. `lab up --provider kind` refuses to
//! start on a failure; `cargo xtask doctor` prints them all.

use std::fmt;

use labkit::tr;

/// How a check came out (doctor's JSON says it in lower case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

/// One line of a preflight report: what was checked, what was found, and the
/// fix when it is not a pass (doctor's JSON has these fields).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub found: String,
    pub fix: Option<String>,
}

impl Check {
    pub fn pass(name: &'static str, found: impl Into<String>) -> Check {
        Check { name, status: Status::Pass, found: found.into(), fix: None }
    }

    pub fn warn(name: &'static str, found: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { name, status: Status::Warn, found: found.into(), fix: Some(fix.into()) }
    }

    pub fn fail(name: &'static str, found: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { name, status: Status::Fail, found: found.into(), fix: Some(fix.into()) }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self.status {
            Status::Pass => tr!("pass"),
            Status::Warn => tr!("WARN"),
            Status::Fail => tr!("FAIL"),
        };
        let name = labkit::say::translate(self.name, &[]);
        let (status, name) = (labkit::say::padded(&status, 4), labkit::say::padded(&name, 22));
        write!(f, "{status}  {name} {}", self.found)?;
        if let Some(fix) = &self.fix {
            let fix = fix.replace('\n', "\n           ");
            write!(f, "\n      {}", tr!("fix: {fix}", fix))?;
        }
        Ok(())
    }
}

/// `kind version` ("kind v0.33.0 go1.26.8 linux/amd64"; `None`: kind is not
/// on PATH) against kind/node-images.toml: a release with a row passes, with
/// the node image it runs.
pub fn kind_version(output: Option<&str>, table: &[labkit::kind_releases::Release]) -> Check {
    const NAME: &str = "kind";
    let supported = table.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>().join(" / ");
    let Some(output) = output else {
        return Check::fail(
            NAME,
            tr!("not found"),
            tr!("run `nix develop` (it provides kind), or install kind {supported}", supported),
        );
    };
    match labkit::kind_releases::for_kind(table, output) {
        Ok(row) => Check::pass(
            NAME,
            tr!(
                "{version} (node image {image})",
                version = labkit::kind_releases::version_of(output).unwrap_or_default(),
                image = labkit::kind_releases::node_tag(&row.image)
            ),
        ),
        Err(why) => Check::fail(
            NAME,
            why,
            tr!("use kind {supported}, or add a row to kind/node-images.toml", supported),
        ),
    }
}

/// `docker info --format '{{.ServerVersion}} {{.DriverStatus}}'`-like probe:
/// `Ok(server version line)` or `Err(what docker said)`.
pub fn docker_daemon(probe: Result<&str, &str>) -> Check {
    const NAME: &str = "Docker daemon";
    match probe {
        Ok(version) => {
            Check::pass(NAME, tr!("reachable, engine {version}", version = version.trim()))
        }
        Err(error) if error.contains("not found") => Check::fail(
            NAME,
            tr!("no docker client"),
            tr!(
                "install Docker (Docker Desktop, or the docker.io package), or use `--provider envtest`"
            ),
        ),
        Err(error) => Check::fail(
            NAME,
            tr!(
                "not reachable: {error}",
                error = error.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim()
            ),
            tr!(
                "start Docker (Docker Desktop, or `sudo systemctl start docker`), or use `--provider envtest`"
            ),
        ),
    }
}

/// Which image store Docker uses: `docker info --format '{{.DriverStatus}}'`
/// mentions `io.containerd.snapshotter` with the containerd store, where
/// `kind load docker-image` fails (the kit loads an archive instead).
pub fn image_store(driver_status: &str) -> Check {
    let found = if driver_status.contains("io.containerd.snapshotter") {
        tr!("containerd (images are loaded with `kind load image-archive`, which works with it)")
    } else {
        tr!("classic (overlay2 or similar)")
    };
    Check::pass("Docker image store", found)
}

/// The Docker host's cgroup version (`docker info --format '{{.CgroupVersion}}'`:
/// Docker Desktop's VM, not the Mac, is what counts). kubelet 1.35+ refuses
/// v1 unless told otherwise, which `lab up` does on such a host.
pub fn cgroups(version: Option<&str>) -> Check {
    const NAME: &str = "cgroup version";
    match version.map(str::trim) {
        Some("2") => Check::pass(NAME, "v2"),
        Some("1") => Check::warn(
            NAME,
            tr!("v1: `lab up` sets the kubelet's failCgroupV1: false (Kubernetes deprecates v1)"),
            tr!("prefer a cgroup v2 host (systemd.unified_cgroup_hierarchy=1)"),
        ),
        Some(other) => Check::warn(
            NAME,
            tr!("Docker reports {other}", other = format!("{other:?}")),
            tr!("check `docker info`; kind needs cgroup v1 or v2"),
        ),
        None => Check::warn(
            NAME,
            tr!("unknown (Docker did not say)"),
            tr!("check `docker info --format '{{.CgroupVersion}}'`"),
        ),
    }
}

/// inotify limits kind's documentation asks for (many watchers inside the node).
pub fn inotify(max_user_watches: Option<u64>, max_user_instances: Option<u64>) -> Check {
    const NAME: &str = "inotify limits";
    const WATCHES: u64 = 524_288;
    const INSTANCES: u64 = 512;
    match (max_user_watches, max_user_instances) {
        (Some(w), Some(i)) if w >= WATCHES && i >= INSTANCES => {
            Check::pass(NAME, format!("max_user_watches {w}, max_user_instances {i}"))
        }
        (Some(w), Some(i)) => Check::warn(
            NAME,
            tr!("max_user_watches {w}, max_user_instances {i}: low for kind", w, i),
            format!(
                "`sudo sysctl fs.inotify.max_user_watches={WATCHES} fs.inotify.max_user_instances={INSTANCES}`"
            ),
        ),
        _ => Check::pass(NAME, tr!("not readable here (not Linux): Docker Desktop sets its own")),
    }
}

/// Free disk where images and the cluster live, in bytes.
pub fn free_disk(bytes: Option<u64>) -> Check {
    const NAME: &str = "free disk";
    const GIB: u64 = 1 << 30;
    match bytes {
        Some(b) if b >= 10 * GIB => Check::pass(NAME, format!("{} GiB", b / GIB)),
        Some(b) if b >= 4 * GIB => Check::warn(
            NAME,
            format!("{} GiB", b / GIB),
            tr!("free at least 10 GiB: a node image is ~1 GiB unpacked, plus builds"),
        ),
        Some(b) => Check::fail(
            NAME,
            format!("{} MiB", b >> 20),
            tr!("free at least 10 GiB (`docker system prune`, `cargo clean`)"),
        ),
        None => Check::warn(NAME, tr!("unknown"), tr!("check with `df -h .`")),
    }
}

/// Host architecture: kind node images exist for amd64 and arm64.
pub fn architecture(arch: &str) -> Check {
    const NAME: &str = "architecture";
    match arch {
        "x86_64" | "aarch64" => Check::pass(NAME, arch.to_string()),
        other => Check::fail(
            NAME,
            other.to_string(),
            tr!("kind node images exist for x86_64 and aarch64 only"),
        ),
    }
}

/// A Go version as `go version` ("go version go1.26.8 linux/amd64") or a
/// go.mod's `go` line ("go 1.26.3") says it: (minor, patch) of Go 1.
pub fn go_version(text: &str) -> Option<(u32, u32)> {
    let rest =
        text.split_whitespace().find_map(|w| w.strip_prefix("go1.").or(w.strip_prefix("1.")))?;
    let mut parts = rest.split('.');
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    Some((minor, patch))
}

fn shown_go((minor, patch): (u32, u32)) -> String {
    format!("1.{minor}.{patch}")
}

/// The oldest Go that fetches a newer toolchain itself when a go.mod asks
/// for one (GOTOOLCHAIN=auto, the default).
const GO_FETCHES_TOOLCHAINS: (u32, u32) = (21, 0);

/// Go on PATH (`go version` output) against `required`, the newest `go` line
/// of the kit's modules. Besides the envtest programs (their own check) the
/// kit builds with Go the kind node image (`--node-image built`), the course's
/// program for `grade` and `bench --peer go`, and the tests' peers.
pub fn go(output: Option<&str>, required: (u32, u32)) -> Check {
    const NAME: &str = "Go";
    let install = tr!(
        "install Go {required} or newer (https://go.dev/dl, or your package manager), or `nix develop`",
        required = shown_go(required)
    );
    let Some(found) = output.and_then(go_version) else {
        let needed =
            tr!("not found: needed to build the course's Go program (grade, bench --peer go), \
                 the kind node image here and, without other copies, kube-apiserver and etcd");
        return Check::warn(NAME, needed, install);
    };
    let (shown, asked) = (shown_go(found), shown_go(required));
    if found >= required {
        Check::pass(NAME, shown)
    } else if found >= GO_FETCHES_TOOLCHAINS {
        let found = tr!(
            "{found}, older than the kit's modules ask ({required}): go fetches that toolchain \
             at the first build (GOTOOLCHAIN=auto, needs the network)",
            found = shown,
            required = asked
        );
        Check::warn(NAME, found, install)
    } else {
        let found = tr!(
            "{found}: too old to fetch the {required} the kit's modules ask for",
            found = shown,
            required = asked
        );
        Check::fail(NAME, found, install)
    }
}

/// The envtest lab's two programs: each found without a build (`located`:
/// name and where), or a Go (`go version` output) that builds the missing
/// ones (`required`: as [`go`]).
pub fn envtest_programs(
    located: &[(&str, Option<String>)],
    go: Option<&str>,
    required: (u32, u32),
) -> Check {
    const NAME: &str = "envtest programs";
    let found: Vec<String> =
        located.iter().filter_map(|(n, at)| at.as_ref().map(|at| format!("{n} ({at})"))).collect();
    let missing: Vec<&str> =
        located.iter().filter(|(_, at)| at.is_none()).map(|(n, _)| *n).collect();
    if missing.is_empty() {
        return Check::pass(NAME, found.join(", "));
    }
    match go.and_then(go_version) {
        Some(version) if version >= GO_FETCHES_TOOLCHAINS => Check::pass(
            NAME,
            tr!(
                "{missing} built with Go {go} at the first `lab up` (minutes)",
                missing = missing.join(", "),
                go = shown_go(version.max(required))
            ),
        ),
        _ => Check::fail(
            NAME,
            tr!("{missing} not found, and no Go to build them", missing = missing.join(", ")),
            tr!(
                "`nix develop` provides both; or install Go {required} or newer; or set \
                 KUBEBUILDER_ASSETS (`cargo xtask envtest-bins` shows the search)",
                required = shown_go(required)
            ),
        ),
    }
}

/// A program the kit's builds run: what its version said (`found`), else what it is `needed`
/// for and how to install its package on the systems the README's platforms table names.
fn needed(
    name: &'static str,
    found: Option<String>,
    needed: String,
    (debian, fedora): (&str, &str),
) -> Check {
    match found {
        Some(found) => Check::pass(name, found),
        None => Check::fail(
            name,
            needed,
            tr!(
                "Debian/Ubuntu: `sudo apt install {debian}`; Fedora: `sudo dnf install {fedora}`; macOS: {macos}",
                debian,
                fedora,
                macos = "`xcode-select --install`"
            ),
        ),
    }
}

/// `cc --version`'s output (`None`: no C compiler): the build scripts of ring
/// (rustls' cryptography) and psm (kube's JSONPath parser) compile C.
pub fn c_compiler(output: Option<&str>) -> Check {
    let first = output.and_then(|o| o.lines().next()).map(|line| line.trim().to_string());
    let needed_for = tr!("cc not found: ring and psm compile C while cargo builds the kit");
    needed("C compiler", first, needed_for, ("build-essential", "gcc"))
}

/// `git --version`'s output: the kit applies its patches to the course's Go
/// program with `git apply` (grading and bench variants, the tests).
pub fn git(output: Option<&str>) -> Check {
    let version = output.map(|out| out.trim().trim_start_matches("git version ").to_string());
    let needed_for = tr!("not found: the kit patches the course's Go program with `git apply`");
    needed("git", version, needed_for, ("git", "git"))
}

/// The static C library the image's host build links when the binary is a
/// glibc one (`-C target-feature=+crt-static`, no musl target installed), as
/// the build's own probe ([`static_libc`]) judges it. With musl, Rust brings
/// its own.
pub fn static_c_library(musl: bool, printed: Option<&str>) -> Check {
    const NAME: &str = "static libc";
    if musl {
        return Check::pass(NAME, tr!("the musl target is installed: Rust links its own libc"));
    }
    match static_libc(printed) {
        Ok(()) => Check::pass(NAME, printed.unwrap_or_default().trim().to_string()),
        Err(e) => Check::fail(
            NAME,
            tr!("the controller image's static build cannot link"),
            tr!("{e}; or `rustup target add $(uname -m)-unknown-linux-musl`", e),
        ),
    }
}

/// `kind get clusters` output against the lab's name.
pub fn existing_cluster(clusters: &str, name: &str) -> Check {
    const NAME: &str = "existing cluster";
    if clusters.lines().any(|c| c.trim() == name) {
        Check::warn(
            NAME,
            tr!("{name} exists: `lab up` reuses it", name),
            tr!(
                "to start clean: `cargo xtask lab down --name {name}`, or `--name` another lab",
                name
            ),
        )
    } else {
        Check::pass(NAME, tr!("none named {name}", name))
    }
}

/// The controller's default port when a learner runs it by hand (`cargo run`): the labs
/// pick free ports themselves, so a taken one only means `--listen` another.
pub fn port(name: &'static str, port: u16, taken: bool) -> Check {
    if taken {
        Check::warn(
            name,
            tr!(
                "port {port} in use: the labs pick a free one; a controller run by hand does not",
                port
            ),
            tr!(
                "run it by hand with `--listen 127.0.0.1:8081`, or stop what listens on {port} (`ss -ltnp 'sport = :{port}'`)",
                port
            ),
        )
    } else {
        Check::pass(name, tr!("port {port} free", port))
    }
}

/// rustc against `rust-toolchain.toml`'s channel.
pub fn rustc(version_output: Option<&str>, pinned: &str) -> Check {
    const NAME: &str = "rustc";
    let Some(out) = version_output else {
        let fix = tr!("install rustup (it reads rust-toolchain.toml), or `nix develop`");
        return Check::fail(NAME, tr!("not found"), fix);
    };
    match out.split_whitespace().nth(1).unwrap_or_default() {
        version if version == pinned => Check::pass(NAME, version),
        version => Check::warn(
            NAME,
            tr!("{version}, rust-toolchain.toml pins {pinned}", version, pinned),
            tr!("run cargo through rustup (it switches), or `nix develop`"),
        ),
    }
}

/// kubectl's client minor against the kit's Kubernetes minor (±1 supported): every by-hand
/// step of the course's pages runs it.
pub fn kubectl(client_minor: Option<u32>, target_minor: u32) -> Check {
    const NAME: &str = "kubectl";
    let install = tr!(
        "install kubectl 1.{minor} (https://kubernetes.io/docs/tasks/tools/), or `nix develop`",
        minor = target_minor
    );
    match client_minor {
        None => {
            Check::fail(NAME, tr!("not found: every by-hand step of the course runs it"), install)
        }
        Some(m) if m.abs_diff(target_minor) <= 1 => {
            Check::pass(NAME, tr!("1.{m} (cluster 1.{target})", m, target = target_minor))
        }
        Some(m) => Check::warn(
            NAME,
            tr!("1.{m}, more than one minor from 1.{target}", m, target = target_minor),
            install,
        ),
    }
}

/// The toolchain a learner's own project builds with (rustup's default, outside the kit's
/// folder: `rustc --version` there) against the `workqueue` crate's `rust-version`.
pub fn learners_rustc(version_output: Option<&str>, needed: &str) -> Check {
    const NAME: &str = "your project's rustc";
    let version = version_output.and_then(|out| out.split_whitespace().nth(1)).unwrap_or("");
    let numbers =
        |v: &str| -> Vec<u32> { v.split(['.', '-']).map_while(|n| n.parse().ok()).collect() };
    if !version.is_empty() && numbers(version) >= numbers(needed) {
        return Check::pass(NAME, tr!("{version} (workqueue needs {needed})", version, needed));
    }
    Check::fail(
        NAME,
        tr!(
            "{version}: older than the {needed} the `workqueue` crate needs; a project of your own builds with it",
            version = if version.is_empty() { tr!("not found") } else { version.to_string() },
            needed
        ),
        tr!("`rustup default stable` (or `rustup update stable`), or `nix develop`"),
    )
}

/// `gcc -print-file-name=libc.a` prints a path when the static C library is
/// installed, and the bare name when it is not.
pub fn static_libc(printed: Option<&str>) -> anyhow::Result<()> {
    match printed {
        Some(path) if path.trim().contains('/') => Ok(()),
        Some(_) => anyhow::bail!(tr!(
            "a static build needs the C library's static archive (libc.a), which is not installed: \
             `apt-get install libc6-dev` (Debian, Ubuntu) or `dnf install glibc-static` (Fedora)"
        )),
        None => anyhow::bail!(tr!(
            "a static build needs a C compiler: `apt-get install gcc libc6-dev` (Debian, Ubuntu) \
             or `dnf install gcc glibc-static` (Fedora)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUIRED: (u32, u32) = (26, 3);

    #[test]
    fn envtest_programs_found_or_buildable() {
        let both = [("kube-apiserver", Some("PATH".to_string())), ("etcd", Some("PATH".into()))];
        assert_eq!(envtest_programs(&both, None, REQUIRED).status, Status::Pass);
        let one = [("kube-apiserver", None), ("etcd", Some("project cache".to_string()))];
        let go = envtest_programs(&one, Some("go version go1.26.8 linux/amd64"), REQUIRED);
        assert_eq!(go.status, Status::Pass, "{go}");
        assert!(go.found.contains("kube-apiserver built with Go 1.26.8"), "{go}");
        // An older Go fetches the toolchain the modules ask for: it builds with that one.
        let fetches = envtest_programs(&one, Some("go version go1.22.5 linux/amd64"), REQUIRED);
        assert!(fetches.found.contains("built with Go 1.26.3"), "{fetches}");
        for old in [None, Some("go version go1.20.14 linux/amd64")] {
            let check = envtest_programs(&one, old, REQUIRED);
            assert_eq!(check.status, Status::Fail, "{check}");
            assert!(check.fix.as_deref().unwrap().contains("KUBEBUILDER_ASSETS"), "{check}");
        }
    }

    #[test]
    fn go_against_the_modules() {
        assert_eq!(go_version("go version go1.26.8 linux/amd64"), Some((26, 8)));
        assert_eq!(go_version("go 1.26"), Some((26, 0)));
        assert_eq!(go_version("go version devel"), None);
        assert_eq!(go(Some("go version go1.26.3 linux/amd64"), REQUIRED).status, Status::Pass);
        let fetches = go(Some("go version go1.26.2 darwin/arm64"), REQUIRED);
        assert_eq!(fetches.status, Status::Warn, "{fetches}");
        assert!(fetches.found.contains("GOTOOLCHAIN=auto"), "{fetches}");
        assert_eq!(go(None, REQUIRED).status, Status::Warn);
        let old = go(Some("go version go1.19.8 linux/amd64"), REQUIRED);
        assert_eq!(old.status, Status::Fail, "{old}");
        assert!(old.fix.as_deref().unwrap().contains("Go 1.26.3 or newer"), "{old}");
    }

    #[test]
    fn c_compiler_git_and_static_libc() {
        let cc = c_compiler(Some("cc (Debian 12.2.0-14) 12.2.0\nCopyright"));
        assert_eq!((cc.status, cc.found.as_str()), (Status::Pass, "cc (Debian 12.2.0-14) 12.2.0"));
        let none = c_compiler(None);
        assert_eq!(none.status, Status::Fail);
        for hint in ["build-essential", "dnf install gcc", "xcode-select"] {
            assert!(none.fix.as_deref().unwrap().contains(hint), "{none}");
        }
        assert_eq!(git(Some("git version 2.39.5")).found, "2.39.5");
        assert_eq!(git(None).status, Status::Fail);
        assert_eq!(static_c_library(true, None).status, Status::Pass);
        let found = static_c_library(false, Some("/usr/lib/x86_64-linux-gnu/libc.a\n"));
        assert_eq!(found.status, Status::Pass, "{found}");
        let missing = static_c_library(false, Some("libc.a\n"));
        assert_eq!(missing.status, Status::Fail);
        assert!(missing.fix.as_deref().unwrap().contains("glibc-static"), "{missing}");
    }

    #[test]
    fn kind_versions_against_the_table() {
        let table = labkit::kind_releases::table().unwrap();
        let now = kind_version(Some("kind v0.33.0 go1.24.2 linux/amd64"), &table);
        assert_eq!(now.status, Status::Pass);
        assert!(now.found.contains("kindest/node:v1.36.4"), "{}", now.found);
        let before = kind_version(Some("kind v0.32.0 go1.24.2 linux/amd64"), &table);
        assert!(before.found.contains("kindest/node:v1.36.1"), "{}", before.found);
        let old = kind_version(Some("kind v0.29.0 go1.24.2 linux/amd64"), &table);
        assert_eq!(old.status, Status::Fail);
        assert!(old.found.contains("v0.29.0") && old.found.contains("add a row"));
        assert_eq!(kind_version(None, &table).status, Status::Fail);
    }

    #[test]
    fn docker_daemon_states() {
        assert_eq!(docker_daemon(Ok("28.2.2")).status, Status::Pass);
        let down = docker_daemon(Err(
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
        ));
        assert_eq!(down.status, Status::Fail);
        assert!(down.fix.unwrap().contains("start Docker"));
        assert!(
            docker_daemon(Err("docker: command not found")).fix.unwrap().contains("install Docker")
        );
    }

    #[test]
    fn image_stores() {
        assert!(
            image_store("[[driver-type io.containerd.snapshotter.v1]]")
                .found
                .contains("containerd")
        );
        assert!(image_store("[[Backing Filesystem extfs]]").found.contains("classic"));
    }

    #[test]
    fn cgroup_versions_as_docker_reports_them() {
        // Docker Desktop on a Mac reports its Linux VM's version: 2.
        assert_eq!(cgroups(Some("2")).status, Status::Pass);
        let v1 = cgroups(Some("1\n"));
        assert_eq!(v1.status, Status::Warn);
        assert!(v1.found.contains("failCgroupV1"), "{}", v1.found);
        assert_eq!(cgroups(None).status, Status::Warn);
    }

    #[test]
    fn inotify_limits() {
        assert_eq!(inotify(Some(524_288), Some(512)).status, Status::Pass);
        let low = inotify(Some(8192), Some(128));
        assert_eq!(low.status, Status::Warn);
        assert!(low.fix.unwrap().contains("max_user_watches=524288"));
        assert_eq!(inotify(None, None).status, Status::Pass);
    }

    #[test]
    fn disk_architecture_clusters_ports() {
        assert_eq!(free_disk(Some(80 << 30)).status, Status::Pass);
        assert_eq!(free_disk(Some(5 << 30)).status, Status::Warn);
        assert_eq!(free_disk(Some(300 << 20)).status, Status::Fail);
        assert_eq!(free_disk(None).status, Status::Warn);
        assert_eq!(architecture("x86_64").status, Status::Pass);
        assert_eq!(architecture("riscv64").status, Status::Fail);
        assert_eq!(
            existing_cluster("other\nmy-controller-lab\n", "my-controller-lab").status,
            Status::Warn
        );
        assert_eq!(existing_cluster("", "my-controller-lab").status, Status::Pass);
        // The labs pick free ports: a taken 8080 only matters to a controller run by hand.
        assert_eq!(port("controller port", 8080, true).status, Status::Warn);
        assert_eq!(port("controller port", 8080, false).status, Status::Pass);
    }

    #[test]
    fn toolchain_and_kubectl() {
        assert_eq!(
            rustc(Some("rustc 1.95.0 (59807616e 2026-04-14)"), "1.95.0").status,
            Status::Pass
        );
        assert_eq!(rustc(Some("rustc 1.90.0 (x 2025-09-14)"), "1.95.0").status, Status::Warn);
        assert_eq!(rustc(None, "1.95.0").status, Status::Fail);
        assert_eq!(kubectl(Some(36), 36).status, Status::Pass);
        assert_eq!(kubectl(Some(35), 36).status, Status::Pass);
        assert_eq!(kubectl(Some(32), 36).status, Status::Warn);
        // Every by-hand step of the course's pages runs it.
        assert_eq!(kubectl(None, 36).status, Status::Fail);
        let learners = |v| learners_rustc(v, "1.89").status;
        assert_eq!(learners(Some("rustc 1.95.0 (59807616e 2026-04-14)")), Status::Pass);
        assert_eq!(learners(Some("rustc 1.89.0 (29483883e 2025-08-04)")), Status::Pass);
        assert_eq!(learners(Some("rustc 1.88.0 (6b00bc388 2025-06-23)")), Status::Fail);
        assert_eq!(learners(Some("rustc 1.100.0-nightly (x 2027-01-01)")), Status::Pass);
        assert_eq!(learners(None), Status::Fail);
    }

    #[test]
    fn a_check_prints_on_one_line_plus_its_fix_lines_indented() {
        let text = Check::fail("kind", "not found", "run `nix develop`").to_string();
        assert_eq!(text.lines().count(), 2);
        assert!(text.starts_with("FAIL  kind"));
        let two = Check::warn("Go modules", "slow", "a mirror:\n  go env -w GOPROXY=x").to_string();
        assert_eq!(two.lines().nth(2), Some("             go env -w GOPROXY=x"), "{two}");
    }
}

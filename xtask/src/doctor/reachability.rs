//! doctor's network rows: each source the chosen lab fetches from ([`crate::mirrors`]),
//! probed all at once with a short timeout through `curl` (which honours the same proxy
//! variables as cargo, Go and rustup), and for one that fails or is slow, the setting that
//! uses a mirror and the way without a network.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use labkit::command::Cmd;
use labkit::lab_file::Offers;
use labkit::tr;

use super::DoctorArgs;
use crate::lab::kind::{NodeImage, image_present};
use crate::mirrors::{self, Source};
use crate::preflight::{Check, Status};

/// Slower than this to answer is slow.
const SLOW: Duration = Duration::from_secs(2);
/// curl's whole budget for one probe, in seconds.
const TIMEOUT: &str = "5";

/// What a probe found: reached (any HTTP answer, a registry's 401 too, means the source is
/// reachable) after how long, or failed, and why.
pub type Answer = Result<Duration, String>;

/// One source to probe for the chosen lab, at `url`. `required`: the lab cannot come up
/// without it, unreachable fails; else only some steps use it (step 2's nginx, the course's
/// Go program): a warning.
pub struct Row {
    pub source: Source,
    pub required: bool,
    pub url: String,
}

/// Probes every row's address at once (an address shared by two rows, once).
fn probe_all(rows: &[Row]) -> Vec<Answer> {
    let urls: BTreeSet<&str> = rows.iter().map(|r| r.url.as_str()).collect();
    let answers: BTreeMap<&str, Answer> = std::thread::scope(|scope| {
        let probes: Vec<_> =
            urls.into_iter().map(|url| (url, scope.spawn(|| probe(url)))).collect();
        let failed = || Err("the probe panicked".into());
        probes.into_iter().map(|(url, p)| (url, p.join().unwrap_or_else(|_| failed()))).collect()
    });
    rows.iter().map(|r| answers[r.url.as_str()].clone()).collect()
}

fn probe(url: &str) -> Answer {
    // HEAD: an archive of 100 MB answers as fast as a page.
    let cmd = Cmd::argv(["curl", "-sS", "-I", "-o", "/dev/null", "--connect-timeout", "3"]).args([
        "--max-time",
        TIMEOUT,
        "-w",
        "%{http_code} %{time_total}",
        url,
    ]);
    match cmd.output() {
        Ok(out) => answer(
            &String::from_utf8_lossy(&out.stdout),
            &String::from_utf8_lossy(&out.stderr),
            out.status.code(),
        ),
        Err(_) => Err(tr!("curl not found: the network cannot be probed")),
    }
}

/// curl's `-w '%{http_code} %{time_total}'`, its error line and exit code: an HTTP code is an
/// answer; the commonest failures said in the reader's language, others as curl says them.
pub fn answer(printed: &str, stderr: &str, code: Option<i32>) -> Answer {
    let (status, seconds) = printed.trim().split_once(' ').unwrap_or(("000", "0"));
    match (status, seconds.parse::<f64>()) {
        ("000", _) | (_, Err(_)) => Err(match code {
            Some(6) => tr!("its name does not resolve"),
            Some(7) => tr!("the connection is refused"),
            Some(28) => tr!("no answer within {TIMEOUT} s", TIMEOUT),
            _ => {
                let said = stderr.lines().next().unwrap_or_default();
                // `curl: (35) …` → what follows the code.
                said.split_once(") ").map_or(said, |(_, why)| why).trim().to_string()
            }
        }),
        (_, Ok(seconds)) => Ok(Duration::from_secs_f64(seconds)),
    }
}

/// The check of `row` from its probe's `answer`; `route`, another way that works here.
fn check(row: &Row, answer: &Answer, route: Option<&str>) -> Check {
    let Row { source, required, url } = row;
    let (status, found) = match answer {
        Ok(took) => {
            let (took, fast) = (format!("{:.2} s", took.as_secs_f64()), *took <= SLOW);
            if fast {
                return Check::pass(source.name, tr!("reachable ({took}): {url}", took, url));
            }
            (Status::Warn, tr!("slow ({took}): {url}", took, url))
        }
        Err(why) => {
            let status = if *required { Status::Fail } else { Status::Warn };
            (status, tr!("unreachable ({why}): {url}", why, url))
        }
    };
    let translated = |text: &str| labkit::say::translate(text, &[]);
    let mut fix = vec![tr!("a mirror ({whose}):", whose = translated(source.whose))];
    fix.extend(source.setting.iter().map(|line| format!("  `{line}`")));
    fix.extend(source.offline.map(translated));
    fix.extend(route.map(str::to_string));
    Check { name: source.name, status, found, fix: Some(fix.join("\n")) }
}

/// The network rows: what the lab of `offers` fetches from, probed; for a node image Docker Hub
/// cannot give, the routes that work here. `toolchain`: the pinned one, and whether rustup will
/// fetch it; `envtest_missing`: kube-apiserver or etcd is not here.
pub fn checks(
    args: &DoctorArgs,
    offers: &Offers,
    toolchain: (&str, bool),
    envtest_missing: bool,
) -> Vec<Check> {
    labkit::progress!(tr!("probing the network this lab fetches from (at most 5 s)"));
    let rows = rows(args, offers, toolchain, offers.local_control_plane && envtest_missing);
    let answers = probe_all(&rows);
    let reached = |source| rows.iter().zip(&answers).any(|(r, a)| r.source == source && a.is_ok());
    let route = match reached(mirrors::GO_MODULES) && reached(mirrors::DEBIAN) {
        true => tr!(
            "or build it here: `--node-image built` works here (Go modules and Debian packages reachable; about 10 min of CPU)"
        ),
        false => tr!(
            "or build it here: `--node-image built` needs Go modules and Debian packages, unreachable here too"
        ),
    };
    let routes = |row: &Row| (row.source == mirrors::NODE_IMAGE).then_some(route.as_str());
    rows.iter().zip(&answers).map(|(row, answer)| check(row, answer, routes(row))).collect()
}

/// The sources the chosen lab fetches from, each at the address it would use.
fn rows(
    args: &DoctorArgs,
    offers: &Offers,
    (pinned_toolchain, toolchain_missing): (&str, bool),
    envtest_missing: bool,
) -> Vec<Row> {
    let builds_node_image = NodeImage::parse(args.node_image.as_deref()) == NodeImage::Built;
    let row = |source, required, url: String| Row { source, required, url };
    let mut rows = vec![row(mirrors::CRATES, true, crates_index())];
    let dist = std::env::var("RUSTUP_DIST_SERVER").unwrap_or("https://static.rust-lang.org".into());
    let channel = format!("{dist}/dist/channel-rust-{pinned_toolchain}.toml.sha256");
    if toolchain_missing {
        rows.push(row(mirrors::TOOLCHAIN, true, channel));
    }
    rows.push(row(mirrors::GO_MODULES, envtest_missing || builds_node_image, go_proxy()));
    let release = crate::lab::release::Release::here().ok().flatten();
    if let Some(release) = release.filter(|_| envtest_missing) {
        rows.push(row(mirrors::ENVTEST_RELEASES, false, release.url));
    }
    let docker_hub = |mirror: Option<&str>| {
        format!("{}/v2/", mirror.unwrap_or("https://registry-1.docker.io").trim_end_matches('/'))
    };
    let mirror = args.mirror.url.as_deref();
    if offers.node {
        // The kind lab pulls its node image unless it is in Docker, built here or from a bundle.
        let pinned = NodeImage::Pinned.reference(crate::lab::kind::kind_version().as_deref());
        let here = |image: String| image_present(&args.mirror.image(&image)).succeeds();
        let pulls_node_image = NodeImage::parse(args.node_image.as_deref()) == NodeImage::Pinned
            && !pinned.ok().is_some_and(here);
        // Docker's own `registry-mirrors`.
        let docker_mirrors: Vec<String> =
            Cmd::argv(["docker", "info", "--format", "{{json .RegistryConfig.Mirrors}}"])
                .read()
                .ok()
                .and_then(|json| serde_json::from_str(&json).ok())
                .unwrap_or_default();
        let for_node = mirror.or(docker_mirrors.first().map(String::as_str));
        rows.push(row(mirrors::NODE_IMAGE, pulls_node_image, docker_hub(for_node)));
        rows.push(row(mirrors::POD_IMAGES, false, docker_hub(mirror)));
        let release = format!("{}/dists/bookworm/Release", crate::mirrors::debian_mirror());
        rows.push(row(mirrors::DEBIAN, builds_node_image, release));
    }
    if labkit::tools::on_path("nix").is_some() && offers.own_cluster {
        rows.push(row(mirrors::NIX, false, nix_cache()));
    }
    rows
}

/// crates.io's index, or the registry that replaces it in cargo's configuration.
fn crates_index() -> String {
    let home = std::env::var("CARGO_HOME")
        .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap_or_default()));
    let configs =
        [labkit::project::root().join(".cargo/config.toml"), format!("{home}/config.toml").into()];
    let replaced = configs.iter().find_map(|path| {
        let table: toml::Table = toml::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
        let sources = table.get("source")?;
        let with = sources.get("crates-io")?.get("replace-with")?.as_str()?;
        Some(sources.get(with)?.get("registry")?.as_str()?.to_string())
    });
    let index = replaced.unwrap_or("https://index.crates.io".into());
    format!("{}/config.json", index.trim_start_matches("sparse+").trim_end_matches('/'))
}

/// The first proxy of `go env GOPROXY` (Go's default when Go is missing), asked for a module
/// the kit builds.
fn go_proxy() -> String {
    let proxies = Cmd::argv(["go", "env", "GOPROXY"]).read().unwrap_or_default();
    let first = proxies
        .split([',', '|'])
        .find(|p| !p.is_empty() && *p != "direct" && *p != "off")
        .unwrap_or("https://proxy.golang.org");
    format!("{}/k8s.io/client-go/@latest", first.trim_end_matches('/'))
}

/// The first substituter Nix's configuration files name (the user's, then the system's).
fn nix_cache() -> String {
    let home = std::env::var("HOME").unwrap_or_default();
    let files = [format!("{home}/.config/nix/nix.conf"), "/etc/nix/nix.conf".into()];
    let named = files.iter().filter_map(|f| std::fs::read_to_string(f).ok()).find_map(|text| {
        let line = text.lines().find_map(|l| l.trim().strip_prefix("substituters"))?;
        Some(line.trim_start_matches([' ', '=']).split_whitespace().next()?.to_string())
    });
    let first = named.unwrap_or("https://cache.nixos.org".into());
    format!("{}/nix-cache-info", first.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_answer_is_reached_and_curls_error_is_the_reason() {
        assert_eq!(answer("401 0.120", "", Some(0)), Ok(Duration::from_millis(120)));
        let resolve = "curl: (6) Could not resolve host: registry-1.docker.io\n";
        assert_eq!(answer("000 0.003", resolve, Some(6)), Err(tr!("its name does not resolve")));
        let tls = "curl: (35) OpenSSL SSL_connect: SSL_ERROR_SYSCALL\n";
        assert_eq!(
            answer("000 0.2", tls, Some(35)),
            Err("OpenSSL SSL_connect: SSL_ERROR_SYSCALL".into())
        );
        assert!(matches!(answer("000 5.001", "", Some(28)), Err(why) if why.contains('5')));
    }

    #[test]
    fn an_unreachable_required_source_fails_with_its_mirror_and_routes() {
        let row = Row {
            source: mirrors::NODE_IMAGE,
            required: true,
            url: "https://registry-1.docker.io/v2/".into(),
        };
        let failed = Err(tr!("its name does not resolve"));
        let check = check(&row, &failed, Some("`--node-image built`: works here"));
        assert_eq!(check.status, Status::Fail);
        let fix = check.fix.unwrap();
        for line in mirrors::NODE_IMAGE.setting {
            assert!(fix.contains(line), "{fix}");
        }
        assert!(
            fix.contains("--bundle") && fix.ends_with("`--node-image built`: works here"),
            "{fix}"
        );
        let sometimes = Row { required: false, ..row };
        assert_eq!(super::check(&sometimes, &failed, None).status, Status::Warn);
        let slow = Ok(Duration::from_secs(3));
        assert_eq!(super::check(&sometimes, &slow, None).status, Status::Warn);
        let quick = Ok(Duration::from_millis(40));
        assert_eq!(super::check(&sometimes, &quick, None).status, Status::Pass);
    }
}

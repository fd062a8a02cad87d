//! The images kubeadm runs the control plane from, built here under the
//! names it asks for (`kubeadm config images list`) and preloaded into the
//! node: one static program in a `FROM scratch` image each, except kube-proxy
//! (it needs iptables: the rootfs is its base) and pause (Kubernetes' own
//! `pause.c` from the k8s.io/kubernetes module, compiled statically).
//!
//! etcd runs the version `xtask/envtest/etcd` pins (the envtest lab's) under
//! the tag kubeadm asks for, which names an older 3.6 patch release.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, ensure};

use super::{Build, Recipe};
use labkit::command::Cmd;
use labkit::project::shown;
use xtask::plan::Step;

const REGISTRY: &str = "registry.k8s.io";
/// Tags kubeadm 1.36 asks for that no pinned module names: checked against
/// `kubeadm config images list` at build time.
const ETCD_TAG: &str = "3.6.8-0";
const PAUSE_TAG: &str = "3.10.2";
const PATH_ENV: &str = "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin";

/// One image to build.
#[derive(Clone, Debug)]
pub struct ComponentImage {
    /// `kube-apiserver`: names its build context and archive.
    pub name: &'static str,
    pub tag: String,
    /// The rootfs image, or `None` for `FROM scratch`.
    pub base: Option<String>,
    pub binary: PathBuf,
    /// Where the program goes in the image.
    pub target: String,
    /// The image's entrypoint (images kubeadm runs with `command:` need none).
    pub entrypoint: bool,
}

impl ComponentImage {
    pub fn dockerfile(&self) -> String {
        let mut text = format!(
            "# Written by `cargo maint node-image` (maint/src/node_image/images.rs).\n\
             FROM {}\nCOPY {} {}\nENV PATH={PATH_ENV}\n",
            self.base.as_deref().unwrap_or("scratch"),
            self.file_name(),
            self.target
        );
        if self.entrypoint {
            text.push_str(&format!("ENTRYPOINT [\"{}\"]\n", self.target));
        }
        text
    }

    fn file_name(&self) -> String {
        self.binary.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }

    fn context(&self, work: &Path) -> PathBuf {
        work.join("images").join(self.name)
    }
}

/// The pause program: `target/node-image/pause-<tag>/pause`.
fn pause_binary(recipe: &Recipe) -> PathBuf {
    recipe.cache.join(format!("pause-{PAUSE_TAG}")).join("pause")
}

/// Every image, in kubeadm's order.
pub fn component_images(recipe: &Recipe) -> Result<Vec<ComponentImage>> {
    // `entry`: the program at the root, as the image's entrypoint.
    let image = |name: &'static str, tag: String, binary: PathBuf, entry: bool| ComponentImage {
        name,
        tag,
        base: None,
        target: if entry { format!("/{name}") } else { format!("/usr/local/bin/{name}") },
        binary,
        entrypoint: entry,
    };
    let mut images = Vec::new();
    for name in ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"] {
        let tag = format!("{REGISTRY}/{name}:{}", recipe.kubernetes);
        let mut kube = image(name, tag, recipe.binary("kubernetes", name)?, false);
        // kube-proxy needs iptables: the rootfs is its base.
        kube.base = (name == "kube-proxy").then(|| recipe.rootfs.image());
        images.push(kube);
    }
    let coredns = format!("{REGISTRY}/coredns/coredns:{}", recipe.component("coredns")?.version);
    images.push(image("coredns", coredns, recipe.binary("coredns", "coredns")?, true));
    images.push(image("pause", pause_tag(), pause_binary(recipe), true));
    let etcd = format!("{REGISTRY}/etcd:{ETCD_TAG}");
    images.push(image("etcd", etcd, recipe.binary("etcd", "etcd")?, false));
    Ok(images)
}

/// The sandbox image every pod starts with (containerd's `sandbox_image`).
pub fn pause_tag() -> String {
    format!("{REGISTRY}/pause:{PAUSE_TAG}")
}

/// Where the image archives go, for the node's containerd to import.
pub fn archives_dir(recipe: &Recipe) -> PathBuf {
    recipe.work().join("archives")
}

/// kubeadm's list checked, pause compiled, the build contexts written, each
/// image built and saved into an archive.
pub fn steps(recipe: &Recipe) -> Result<Vec<Step<Build>>> {
    let images = component_images(recipe)?;
    let kubeadm = recipe.binary("kubernetes", "kubeadm")?;
    let pause = pause_binary(recipe);
    let pause_c = recipe
        .module_dir("k8s.io/kubernetes", &recipe.kubernetes)?
        .join("build/pause/linux/pause.c");
    let expected: Vec<String> = images.iter().map(|i| i.tag.clone()).collect();
    let work = recipe.work();
    let archives = archives_dir(recipe);
    let mut steps = vec![
        Step::probe(
            Cmd::new(kubeadm.display().to_string()).args([
                "config",
                "images",
                "list",
                "--kubernetes-version",
                &recipe.kubernetes,
            ]),
            move |_: &mut Build, out: Result<String>| {
                let listed: Vec<String> = out?.lines().map(|l| l.trim().to_string()).collect();
                same_images(&listed, &expected)
            },
        ),
        {
            let dir = pause.parent().map(Path::to_path_buf).unwrap_or_default();
            Step::own(format!("create {}", shown(&dir)), move |_| {
                Box::pin(async move { labkit::files::create_dir(&dir) })
            })
        },
        Step::run(
            Cmd::argv(["gcc", "-Os", "-Wall", "-Werror", "-static"])
                .arg(format!("-DVERSION=v{PAUSE_TAG}"))
                .arg("-o")
                .path(&pause)
                .path(&pause_c),
        )
        .when(format!("if {} is not built yet", shown(&pause)), {
            let pause = pause.clone();
            move |_: &Build| !pause.is_file()
        }),
        {
            let (images, work, archives) = (images.clone(), work.clone(), archives.clone());
            Step::own(
                format!(
                    "write a Dockerfile and its program into {}/<image>",
                    shown(&work.join("images"))
                ),
                move |_| Box::pin(async move { write_contexts(&images, &work, &archives) }),
            )
        },
    ];
    for image in &images {
        steps.push(Step::run(
            Cmd::argv(["docker", "build", "-q", "-t", &image.tag]).path(&image.context(&work)),
        ));
    }
    for image in &images {
        steps.push(Step::run(
            Cmd::argv(["docker", "save", "-o"])
                .path(&archives.join(format!("{}.tar", image.name)))
                .arg(&image.tag),
        ));
    }
    Ok(steps)
}

/// kubeadm must ask for exactly the images built here.
fn same_images(listed: &[String], built: &[String]) -> Result<()> {
    let mut a = listed.to_vec();
    let mut b = built.to_vec();
    a.sort();
    b.sort();
    ensure!(
        a == b,
        "kubeadm asks for {listed:?}, but this builder makes {built:?}: \
         update the tags in maint/src/node_image/images.rs"
    );
    Ok(())
}

fn write_contexts(images: &[ComponentImage], work: &Path, archives: &Path) -> Result<()> {
    labkit::files::create_dir(archives)?;
    for image in images {
        let dir = image.context(work);
        labkit::files::create_dir(&dir)?;
        std::fs::copy(&image.binary, dir.join(image.file_name()))
            .with_context(|| format!("cannot copy {}", image.binary.display()))?;
        std::fs::write(dir.join("Dockerfile"), image.dockerfile())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_carry_one_program_and_the_tag_kubeadm_asks_for() {
        let image = ComponentImage {
            name: "coredns",
            tag: "registry.k8s.io/coredns/coredns:v1.14.2".into(),
            base: None,
            binary: PathBuf::from("/x/coredns"),
            target: "/coredns".into(),
            entrypoint: true,
        };
        let dockerfile = image.dockerfile();
        assert!(dockerfile.contains("FROM scratch\nCOPY coredns /coredns\n"), "{dockerfile}");
        assert!(dockerfile.contains("ENTRYPOINT [\"/coredns\"]"), "{dockerfile}");
        assert!(same_images(&["b".into(), "a".into()], &["a".into(), "b".into()]).is_ok());
        let error = same_images(&["a".into()], &["a".into(), "b".into()]).unwrap_err();
        assert!(error.to_string().contains("images.rs"), "{error}");
    }
}

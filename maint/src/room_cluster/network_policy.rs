//! NetworkPolicy on the room cluster: kube-router's network policy
//! controller (iptables and ipset), built from `maint/kube-router` on the
//! node image's Debian rootfs (which has both programs), pushed to the
//! room's registry and run as a DaemonSet (`maint/kube-router/kube-router.yaml`).
//!
//! kind's own enforcer, kindnetd, embeds kube-network-policies, and both
//! queue each new connection to userspace with nftables' `queue` statement:
//! on a kernel without CONFIG_NFT_QUEUE (these CI machines) every rule they
//! write is refused. kube-router writes iptables rules and ipsets instead.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::apps::v1::DaemonSet;
use kube::api::Api;

use super::REGISTRY_HOST;
use crate::node_image;
use labkit::command::Cmd;
use labkit::eventually::{Check, eventually};
use labkit::go_build::{self, Definition};
use labkit::project::{self, shown};
use xtask::lab::kind::image_present;

pub(crate) const MODULE: &str = "maint/kube-router";
const KUBE_ROUTER: &str = "github.com/cloudnativelabs/kube-router/v2";
/// Its build, the version stamped in.
const BUILD: Definition = Definition {
    name: "kube-router",
    dir: MODULE,
    module: KUBE_ROUTER,
    cgo: false,
    tags: "",
    stamps: |version| vec![format!("{KUBE_ROUTER}/pkg/version.Version={version}")],
};
const READY_WITHIN: Duration = Duration::from_secs(180);

/// The enforcer built (unless Docker has this very image), pushed, running
/// on every node. Returns its base as pushed too: the room's tests run
/// their probes on it (Debian, with a shell and curl).
pub async fn install(client: &kube::Client) -> Result<String> {
    let base = rootfs().await?;
    let image = image(&base)?;
    Cmd::argv(["docker", "push", "-q", &image]).run()?;
    let pushed = format!("{REGISTRY_HOST}/{base}");
    Cmd::argv(["docker", "tag", &base, &pushed]).run()?;
    Cmd::argv(["docker", "push", "-q", &pushed]).run()?;
    let manifest = project::root().join(MODULE).join("kube-router.yaml");
    let mut documents = labkit::apply::read_documents(&manifest)?;
    for document in &mut documents {
        if document["kind"] == "DaemonSet" {
            document["spec"]["template"]["spec"]["containers"][0]["image"] = image.clone().into();
        }
    }
    labkit::progress!(
        "$ kubectl apply --server-side -f {}    # done with kube-rs",
        shown(&manifest)
    );
    labkit::apply::documents(client, "lab-kit-room-cluster", &manifest, documents).await?;
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    eventually("kube-router ready on every node", READY_WITHIN, || async {
        let status = daemon_sets.get("kube-router").await?.status.unwrap_or_default();
        Ok(Check::done_if(
            status.desired_number_scheduled > 0
                && status.number_ready == status.desired_number_scheduled,
            (),
            format!("{} of {} ready", status.number_ready, status.desired_number_scheduled),
        ))
    })
    .await?;
    Ok(pushed)
}

/// `localhost:5001/lab-kit/kube-router:<version>-<fingerprint>`: the
/// fingerprint covers the component's (what it is built from, and how) and the base image.
fn image(base: &str) -> Result<String> {
    let component = go_build::components([&BUILD])?.remove(0);
    let inputs = format!("{}\n{base}\n{}", component.fingerprint, dockerfile(base));
    let fingerprint = &labkit::fingerprint::sha256_hex(inputs.as_bytes())[..12];
    let tag = format!("{REGISTRY_HOST}/lab-kit/kube-router:{}-{fingerprint}", component.version);
    super::docker_image(tag, "kube-router", |out| {
        component
            .build_cmd(&out.join("kube-router"), &[&format!("{KUBE_ROUTER}/cmd/kube-router")])
            .run_long("building kube-router")?;
        labkit::files::write_public(&out.join("Dockerfile"), dockerfile(base))
    })
}

fn dockerfile(base: &str) -> String {
    format!(
        "# Written by maint/src/room_cluster/network_policy.rs.\nFROM {base}\n\
         COPY kube-router /usr/local/bin/kube-router\nENTRYPOINT [\"/usr/local/bin/kube-router\"]\n"
    )
}

/// The node image's Debian rootfs as a Docker image (iptables, ipset),
/// made first if Docker lacks it (`cargo maint node-image` makes it too).
async fn rootfs() -> Result<String> {
    let recipe = node_image::Recipe::new(&Default::default())?;
    let image = recipe.rootfs.image();
    if !image_present(&image).succeeds() {
        let steps = node_image::rootfs::steps(&recipe)?;
        xtask::plan::execute(steps, &mut node_image::Build::default()).await?;
    }
    Ok(image)
}

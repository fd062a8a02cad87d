//! A Docker Hub mirror on this machine, as a learner in mainland China names one with
//! `--registry-mirror` (CI reaches no registry either): the room's registry (distribution,
//! built here) as `lab-kit-mirror` on kind's network, holding the course's images built
//! here — `library/nginx` from Debian's package. `cargo maint test` brings the kind lab up
//! through it; xtask/tests/kind_lab.rs runs step 2's pod and finds its pull in the mirror's log.

use anyhow::Result;
use labkit::command::Cmd;
use labkit::eventually::Check;

/// The mirror's container, and its address as the kind nodes reach it.
pub const CONTAINER: &str = "lab-kit-mirror";
pub const URL: &str = "http://lab-kit-mirror:5000";
/// Where this machine pushes to it.
const PUSH: &str = "localhost:5002";

/// The running mirror; dropped, it is removed.
pub struct Mirror;

impl Mirror {
    /// Starts it (on kind's network, made first if no cluster has yet) with nginx in it;
    /// `nginx:latest` is in Docker too, as the offline bundle takes it.
    pub async fn start() -> Result<Mirror> {
        let registry = crate::room_cluster::registry_image()?;
        let nginx = nginx_image()?;
        let _ = Cmd::argv(["docker", "rm", "-f", CONTAINER]).read();
        if Cmd::argv(["docker", "network", "inspect", "kind"]).read().is_err() {
            // kind uses a network of this name that exists already (two may race to make it).
            let _ = Cmd::argv(["docker", "network", "create", "kind"]).read();
        }
        let port = format!("127.0.0.1:{}:5000", &PUSH["localhost:".len()..]);
        Cmd::argv(["docker", "run", "-d", "--name", CONTAINER, "--network", "kind", "-p", &port])
            .arg(&registry)
            .run()?;
        let mirror = Mirror;
        let within = std::time::Duration::from_secs(30);
        labkit::eventually::eventually("the mirror to answer", within, || async {
            let reply = labkit::http_probe::get_url(
                &format!("http://127.0.0.1:{}", &PUSH["localhost:".len()..]),
                "/v2/",
                within,
            )
            .await?;
            Ok(Check::done_if(reply.status == 200, (), format!("/v2/ {}", reply.status)))
        })
        .await?;
        let pushed = format!("{PUSH}/library/nginx:latest");
        Cmd::argv(["docker", "tag", &nginx, &pushed]).run()?;
        Cmd::argv(["docker", "tag", &nginx, "nginx:latest"]).run()?;
        Cmd::argv(["docker", "push", &pushed]).run()?;
        Ok(mirror)
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        let _ = Cmd::argv(["docker", "rm", "-f", CONTAINER]).read();
    }
}

/// nginx from Debian's package on the node image's Debian rootfs (which `cargo maint
/// node-image` makes), built unless Docker has this very one.
fn nginx_image() -> Result<String> {
    let rootfs = crate::node_image::Recipe::new(&Default::default())?.rootfs.image();
    let dockerfile = format!(
        "# Written by maint/src/mirror.rs: nginx for the course's pods, from Debian.\nFROM {rootfs}\n\
         RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx-light \
         && rm -rf /var/lib/apt/lists/*\nCMD [\"nginx\", \"-g\", \"daemon off;\"]\n"
    );
    let tag =
        format!("lab-kit/nginx:{}", &labkit::fingerprint::sha256_hex(dockerfile.as_bytes())[..12]);
    crate::room_cluster::docker_image(tag, "nginx-image", |dir| {
        labkit::files::write_public(&dir.join("Dockerfile"), dockerfile)
    })
}

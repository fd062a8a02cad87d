//! What only a real node shows: the kind node's container runtime, asked
//! with the crictl it carries (`docker exec <node> crictl …`).

use anyhow::Context as _;
use serde_json::Value;

use crate::command::Cmd;

/// The kind node's Docker container.
pub struct Node {
    container: String,
}

impl Node {
    pub fn new(container: &str) -> Node {
        Node { container: container.to_string() }
    }

    fn crictl(&self, args: &[&str]) -> Cmd {
        Cmd::argv(["docker", "exec", &self.container, "crictl"]).args(args)
    }

    /// The running container of that name (a static pod's, e.g. `kube-apiserver`).
    pub fn container_id(&self, name: &str) -> anyhow::Result<String> {
        let ids = self.crictl(&["ps", "--name", name, "-q"]).read()?;
        ids.lines()
            .next()
            .map(str::to_string)
            .with_context(|| format!("no running container {name} in {}", self.container))
    }

    /// Kills a container at once (SIGKILL) and removes it; its pod's kubelet
    /// starts a new one. Removed, because the kubelet restarts a container it
    /// still sees exited only after a pause that doubles each time (10 s,
    /// 20 s, … 5 min): a suite that kills the API server a few times would
    /// wait minutes for it.
    pub fn kill_container(&self, id: &str) -> anyhow::Result<()> {
        self.crictl(&["stop", "--timeout", "0", id]).run()?;
        self.crictl(&["rm", id]).run()
    }

    /// `crictl inspect`: the container's status and the OCI spec it runs with.
    pub fn inspect(&self, id: &str) -> anyhow::Result<Value> {
        let text = self.crictl(&["inspect", id]).read()?;
        serde_json::from_str(&text).context("crictl inspect printed no JSON")
    }
}

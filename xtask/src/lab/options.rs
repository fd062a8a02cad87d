//! What `lab up` is asked: every provider's flags, checked against the
//! provider chosen ([`UpOptions::check_for`]).

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;

use labkit::tr;

/// How `lab up` builds the lab.
#[derive(Args, Clone, Debug, Default)]
pub struct UpOptions {
    // Its values are the providers' names ([`super::providers::choice`]).
    #[arg(long, default_value = "auto")]
    pub provider: String,
    /// How to build the controller image (kind and existing).
    #[arg(long, value_enum, default_value_t = crate::image::Builder::Auto)]
    pub image_builder: crate::image::Builder,
    /// Print the commands in order without running them.
    #[arg(long)]
    pub dry_run: bool,
    /// kind only: load the images from an offline bundle (`lab bundle`) and never pull.
    #[arg(long, value_name = "FILE", conflicts_with = "node_image")]
    pub bundle: Option<PathBuf>,
    /// The ConfigMap the controller keeps; the Role is made for exactly this one.
    #[arg(long, value_name = "NAMESPACE/NAME", default_value = "default/my-config",
          value_parser = labkit::lab_file::Target::parse)]
    pub target: labkit::lab_file::Target,
    /// kind only: the node image, instead of the one pinned in kind/cluster.yaml:
    /// `built` (made here by `cargo maint node-image`, for machines that cannot pull)
    /// or an image reference.
    #[arg(long, value_name = "IMAGE")]
    pub node_image: Option<String>,
    #[command(flatten)]
    pub mirror: crate::mirrors::RegistryMirror,
    #[command(flatten)]
    pub existing: ExistingOptions,
}

/// Where `lab up --provider existing` deploys (docs/existing-cluster.md).
#[derive(Args, Clone, Debug, Default)]
pub struct ExistingOptions {
    /// existing only: the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, as kubectl).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// existing only: the kubeconfig's context, i.e. the cluster and who you are there
    /// [default: its current context].
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// existing only: the namespace of the controller, its RBAC and its my-config
    /// [default: the context's, else default].
    #[arg(short, long, value_name = "NAMESPACE", value_parser = parse_namespace)]
    pub namespace: Option<String>,
    /// existing only: create --namespace when it is missing (`lab down` then removes it).
    #[arg(long)]
    pub create_namespace: bool,
    /// existing only: the registry the cluster's nodes pull from; the controller image is
    /// pushed there and the Deployment names it by digest.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub registry: Option<String>,
}

impl UpOptions {
    pub fn envtest() -> Self {
        UpOptions { provider: "envtest".into(), ..Default::default() }
    }

    /// Flags that belong to other providers are refused in one line: `flags` are
    /// the chosen one's ([`super::provider::Provider::flags`]).
    pub fn check_for(&self, flags: &[&str]) -> Result<()> {
        let refused = |flag: &str| !flags.contains(&flag);
        if self.bundle.is_some() && refused("--bundle") {
            bail!(tr!(
                "--bundle holds the kind lab's images: use it with --provider kind (the envtest lab needs no images)"
            ));
        }
        if self.image_builder != crate::image::Builder::Auto && refused("--image-builder") {
            bail!(tr!(
                "--image-builder builds the controller's image, which the envtest lab does not run: use it with --provider kind or existing"
            ));
        }
        if self.mirror.url.is_some() && refused("--registry-mirror") {
            bail!(tr!(
                "--registry-mirror is written into the kind nodes' containerd: use it with --provider kind (on a cluster of your own, its admin sets the nodes' mirror)"
            ));
        }
        if self.node_image.is_some() && refused("--node-image") {
            bail!(tr!("--node-image is the kind node's image: use it with --provider kind"));
        }
        let e = &self.existing;
        let existing = [
            ("--context", e.context.is_some()),
            ("--kubeconfig", e.kubeconfig.is_some()),
            ("--namespace", e.namespace.is_some()),
            ("--create-namespace", e.create_namespace),
            ("--registry", e.registry.is_some()),
        ];
        if existing.iter().any(|&(flag, given)| given && refused(flag)) {
            bail!(tr!(
                "--context, --kubeconfig, --namespace, --create-namespace and --registry are for a cluster that exists: use them with --provider existing"
            ));
        }
        if !self.target.is_default() && refused("--target") {
            bail!(tr!(
                "--target is for the labs the kit makes: on an existing cluster say --namespace NS (the controller keeps NS/my-config)"
            ));
        }
        Ok(())
    }
}

/// `--namespace`: a DNS-1123 label, as Kubernetes requires of a namespace.
pub fn parse_namespace(text: &str) -> Result<String, String> {
    if ::controller::desired::is_dns1123_label(text) {
        Ok(text.to_string())
    } else {
        Err(tr!(
            "{text} is not a namespace name (lowercase letters, digits and '-', at most 63)",
            text = format!("{text:?}")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_builder_is_refused_for_the_envtest_lab_only() {
        let nix = UpOptions { image_builder: crate::image::Builder::Nix, ..UpOptions::envtest() };
        let flags = |name| crate::lab::providers::named(name).unwrap().flags();
        let refused = nix.check_for(flags("envtest")).unwrap_err().to_string();
        assert!(refused.starts_with("--image-builder builds the controller's image"), "{refused}");
        assert!(nix.check_for(flags("kind")).is_ok());
        assert!(UpOptions::envtest().check_for(flags("envtest")).is_ok());
    }
}

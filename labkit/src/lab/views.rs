//! The same lab seen otherwise: keeping another ConfigMap, its controller a
//! local process of the caller's, its controller's kubeconfig for another
//! namespace. What the bench gives each of its sides.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use controller::desired::Desired;
use kube::config::Kubeconfig;

use super::Lab;

impl Lab {
    /// The same lab keeping ConfigMap `namespace/name` instead (same data):
    /// the bench gives each side a my-config of its own. Only what is kept
    /// differs; lab.json stays the lab's.
    pub fn keeping(&self, namespace: &str, name: &str) -> anyhow::Result<Lab> {
        let desired = Desired::new(namespace, name, self.desired.data().clone())
            .map_err(anyhow::Error::msg)?;
        Ok(Lab { desired, extra_args: BTreeMap::new(), ..self.clone() })
    }

    /// The same lab, its controller a local process the caller runs, with
    /// `kubeconfig`, serving `url` — on a lab whose own controller is a
    /// Deployment (the bench runs its sides on this machine). Its metrics
    /// are then read from `url`, not through the pod proxy.
    pub fn with_local_controller(&self, url: &str, kubeconfig: &Path) -> Lab {
        let mut lab = Lab { extra_args: BTreeMap::new(), local_controller: true, ..self.clone() };
        lab.file.controller.url = url.to_string();
        lab.file.controller.kubeconfig = kubeconfig.to_path_buf();
        lab
    }

    /// The controller's kubeconfig, its context's namespace the one this lab
    /// keeps my-config in ([`Lab::keeping`]): for programs that take their
    /// namespace from the kubeconfig, as kubectl does. Outside the lab's
    /// namespace a copy is written in the borrow's folder ([`Lab::borrowed_dir`]).
    pub fn controller_kubeconfig(&self) -> anyhow::Result<PathBuf> {
        let (path, namespace) = (&self.file.controller.kubeconfig, self.desired.namespace());
        if namespace == self.file.target.namespace {
            return Ok(path.clone());
        }
        let mut config = Kubeconfig::read_from(path)?;
        for named in &mut config.contexts {
            if let Some(context) = named.context.as_mut() {
                context.namespace = Some(namespace.to_string());
            }
        }
        let dir = self.borrowed_dir();
        crate::files::create_dir(&dir)?;
        let copy = dir.join(format!("controller-{namespace}.kubeconfig"));
        crate::files::write_private(&copy, &serde_saphyr::to_string(&config)?)?;
        Ok(copy)
    }
}

//! `lab up`: start a lab unless a healthy one is already there. A first
//! `up` that fails or is interrupted (SIGINT, SIGTERM, SIGHUP) is undone
//! from the lab's record; one killed leaves the record for `lab down`.

use std::process::ExitCode;

use anyhow::{Result, anyhow, bail};

use crate::interrupt::Interrupts;
use crate::lab::envtest::{self, Layout};
use crate::lab::{UpOptions, existing, kind, provider};
use crate::plan;
use labkit::lab_file::{LabFile, ProviderKind};
use labkit::project::shown;
use labkit::record::Record;

pub async fn run(name: &str, options: &UpOptions) -> Result<ExitCode> {
    let provider = provider::resolve(options.provider)?;
    check_flags(options, provider)?;
    if options.dry_run && provider == ProviderKind::Envtest {
        let layout = Layout::new(&labkit::project::lab_dir(name));
        print!("{}", plan::render(&envtest::up_plan(name, &layout, options.controller_host())?));
        return Ok(ExitCode::SUCCESS);
    }
    if options.dry_run {
        up(name, options, provider).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let state_dir = labkit::project::lab_dir(name);
    crate::borrow::put_back_if_left(name).await?;
    // An update of a lab that is up is not undone; a first `up` (or the
    // completion of an interrupted one) is, from the lab's record.
    let was_up = LabFile::read(&state_dir).ok().flatten().is_some();
    let mut signals = Interrupts::catch(&state_dir.join("hangup.log"))?;
    let result = tokio::select! {
        result = up(name, options, provider) => result,
        () = signals.first("lab up") => Err(anyhow!("interrupted")),
    };
    let lab = match result {
        Ok(Some(lab)) => lab,
        Ok(None) => bail!("lab up finished without writing lab.json"),
        Err(error) if was_up => return Err(error),
        Err(error) => {
            undo(name, provider, signals.seen.is_some(), signals).await;
            return Err(error);
        }
    };
    print_how_to_use(&lab);
    Ok(ExitCode::SUCCESS)
}

/// After a first `up` failed or was interrupted: `lab down`, which undoes
/// what the lab's record names. A failed envtest `up` has stopped its own
/// processes and keeps its logs; an interrupted one has not. Each further
/// signal gives up at once: the record stays for `lab down`.
async fn undo(name: &str, provider: ProviderKind, interrupted: bool, signals: Interrupts) {
    if provider == ProviderKind::Envtest && !interrupted {
        return;
    }
    let record = Record::path(&labkit::project::lab_dir(name));
    let again =
        format!("`cargo xtask lab down --name {name}` removes what {} names", shown(&record));
    let said = again.clone();
    signals.further(move |signal| {
        eprintln!("{signal}: given up undoing; {said}");
        std::process::exit(130);
    });
    eprintln!("lab up did not finish: undoing what it made");
    if let Err(error) = super::down::run(name, false).await {
        eprintln!("warning: the undo failed: {error:#}; {again}");
    }
}

/// Flags that belong to another provider are refused in one line.
fn check_flags(options: &UpOptions, provider: ProviderKind) -> Result<()> {
    if options.bundle.is_some() && provider != ProviderKind::Kind {
        bail!(
            "--bundle holds the kind lab's images: use it with --provider kind (the envtest lab needs no images)"
        );
    }
    if provider != ProviderKind::Kind && options.node_image.is_some() {
        bail!("--node-image is the kind node's image: use it with --provider kind");
    }
    let existing = &options.existing;
    if provider != ProviderKind::Existing
        && (existing.context.is_some()
            || existing.registry.is_some()
            || existing.kubeconfig.is_some()
            || existing.namespace.is_some()
            || existing.create_namespace)
    {
        bail!(
            "--context, --kubeconfig, --namespace, --create-namespace and --registry are for a cluster that exists: use them with --provider existing"
        );
    }
    Ok(())
}

/// The provider's `up`; `None` after a dry run.
async fn up(name: &str, options: &UpOptions, provider: ProviderKind) -> Result<Option<LabFile>> {
    Ok(match provider {
        ProviderKind::Envtest => Some(match reuse_or_clean(name, &options.target).await? {
            Some(lab) => lab,
            None => {
                envtest::up(
                    name,
                    &Layout::new(&labkit::project::lab_dir(name)),
                    options.controller_host(),
                    &options.target,
                )
                .await?
            }
        }),
        // kind's own steps skip what is already done (cluster, image, manifests).
        ProviderKind::Kind => {
            if let Ok(Some(lab)) = LabFile::read(&labkit::project::lab_dir(name))
                && lab.provider != ProviderKind::Kind
            {
                bail!(
                    "lab {name} is an {} lab: `cargo xtask lab down --name {name}` first",
                    lab.provider
                );
            }
            let images = match &options.bundle {
                Some(bundle) => kind::Images::Bundle(bundle.clone()),
                None => kind::Images::Build(
                    options.image_builder,
                    kind::NodeImage::parse(options.node_image.as_deref()),
                ),
            };
            kind::up(name, &images, &options.target, options.dry_run).await?
        }
        ProviderKind::Existing => {
            let given = given(options)?;
            existing::up(name, &given, options.image_builder, options.dry_run).await?
        }
    })
}

/// What `--provider existing` needs, checked.
fn given(options: &UpOptions) -> Result<existing::Given> {
    if !options.target.is_default() {
        bail!(
            "--target is for the labs the kit makes: on an existing cluster say --namespace NS (the controller keeps NS/my-config)"
        );
    }
    existing::Given::new(&options.existing)
}

/// An envtest lab that is up and healthy is reused; anything else under its
/// name is cleaned up so a fresh one can start.
async fn reuse_or_clean(name: &str, target: &labkit::lab_file::Target) -> Result<Option<LabFile>> {
    let layout = Layout::new(&labkit::project::lab_dir(name));
    match LabFile::read(&layout.state_dir) {
        Ok(Some(lab)) if lab.provider == ProviderKind::Kind => {
            bail!(
                "lab {name} is a kind lab: `cargo xtask lab down --name {name}` first, or use another --name"
            )
        }
        Ok(Some(lab)) if lab.target != *target => {
            labkit::progress!(
                "lab {name} keeps {}, not {target}: starting it anew for {target}",
                lab.target
            );
            envtest::down(&layout).await?;
        }
        Ok(Some(lab)) => {
            let health = envtest::health(&lab).await;
            if health.healthy {
                labkit::progress!("lab {name} is already up and healthy; not starting another");
                for line in &health.lines {
                    labkit::progress!("  {line}");
                }
                return Ok(Some(lab));
            }
            labkit::progress!("lab {name} is there but not healthy:");
            for line in &health.lines {
                labkit::progress!("  {line}");
            }
            labkit::progress!("cleaning it up and starting anew");
            envtest::down(&layout).await?;
        }
        Ok(None) if layout.state_dir.exists() => {
            labkit::progress!(
                "{} holds an incomplete lab (no lab.json): cleaning it up",
                layout.state_dir.display()
            );
            envtest::down(&layout).await?;
        }
        Ok(None) => {}
        Err(error) => {
            eprintln!("warning: {error:#}; cleaning up");
            envtest::down(&layout).await?;
        }
    }
    Ok(None)
}

fn print_how_to_use(lab: &LabFile) {
    println!();
    println!("  lab file:        {}", LabFile::path(&lab.state_dir).display());
    println!("  API server:      {} ({})", lab.api_server_url, lab.kubernetes_version);
    if lab.provider == ProviderKind::Envtest {
        println!("  controller:      {} (/healthz /readyz /metrics)", lab.controller.url);
    } else {
        println!("  controller:      deployment/{} in {}", kind::DEPLOYMENT, lab.name);
    }
    if let Some(existing) = &lab.existing {
        println!("  namespace:       {} (context {})", existing.namespace, existing.context);
        println!("  image:           {}", existing.controller_image);
    }
    println!("  admin:           export KUBECONFIG={}", lab.admin_kubeconfig.display());
    println!("  a new terminal:  eval \"$(cargo xtask lab env --name {})\"", lab.name);
    println!("  controller log:  cargo xtask lab logs -f --name {}", lab.name);
    println!("  experiments:     cargo xtask e2e --name {}", lab.name);
    println!("  stop:            cargo xtask lab down --name {}", lab.name);
}

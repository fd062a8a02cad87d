//! Stage 2 (controller/examples/stage2_crd.rs) against the lab: its CRD and
//! RBAC applied from `manifests/stage2/`, the example run as its own
//! ServiceAccount (a TokenRequest token, so the Role is what it gets), then
//! the course's four experiments on a template's ConfigMap, a second
//! template's ConfigMap made with no kick, the status, and garbage
//! collection after a template's deletion (kind; envtest has no garbage
//! collector and says so). Everything it made is deleted again.

use std::{collections::BTreeMap, time::Duration};

use anyhow::{Context as _, bail, ensure};
use controller::template::{ConfigMapTemplate, ConfigMapTemplateSpec, READY};
use k8s_openapi::api::{authorization::v1::ResourceAttributes, core::v1::ConfigMap};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use super::{Running, write_sample};
use labkit::eventually::{Check, eventually, throughout};
use labkit::stage2::{ACCOUNT, NAMESPACE, install, uninstall};
use labkit::{lab::Lab, suite::Measured, tr};

const WITHIN: Duration = Duration::from_secs(30);
const CREATED: &str = "does not exist, created it";
const CORRECTED: &str = "drifted from its template, corrected it";

fn data(env: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app.conf".to_string(), format!("env={env}\nreplicas=3"))])
}

fn template(name: &str, config_map: &str) -> ConfigMapTemplate {
    ConfigMapTemplate::new(
        name,
        ConfigMapTemplateSpec { config_map_name: config_map.into(), data: data("prod") },
    )
}

/// The stage-2 test: set up, run the experiments, and take everything away.
pub async fn stage2_crd(lab: &mut Lab) -> anyhow::Result<Measured> {
    let kubeconfig = install(lab).await?;
    let admin = lab.client();
    let result = experiments(lab, &admin, &kubeconfig).await;
    let templates: Api<ConfigMapTemplate> = Api::namespaced(admin.clone(), NAMESPACE);
    // A template a failed run left held by its finalizer would hold the CRD too.
    let _ = release_held(&templates).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), NAMESPACE);
    let made = ["stage2-a", "stage2-b", "stage2-c"].into_iter().chain(HELD.map(|(_, cm)| cm));
    for name in made {
        let _ = config_maps.delete(name, &DeleteParams::default()).await;
    }
    uninstall(lab).await?;
    result
}

async fn experiments(
    lab: &Lab,
    admin: &Client,
    kubeconfig: &std::path::Path,
) -> anyhow::Result<Measured> {
    let reviews = least_privilege(admin).await?;
    let templates: Api<ConfigMapTemplate> = Api::namespaced(admin.clone(), NAMESPACE);
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), NAMESPACE);
    let a = templates.create(&PostParams::default(), &template("template-a", "stage2-a")).await?;
    let owner = a.metadata.uid.clone().with_context(|| tr!("a created object has a uid"))?;

    // 1. start creates: the template exists, its ConfigMap does not.
    let mut running = Running::start_as(kubeconfig, "stage2_crd", |c| c.env_remove("RUST_LOG"))?;
    running.until(&tr!("the create of stage2-a"), |l| l.contains(CREATED)).await?;
    let first = wait_kept(&config_maps, "stage2-a", &owner).await?;
    // 2. delete → recreated.
    config_maps.delete("stage2-a", &DeleteParams::default()).await?;
    running.until(&tr!("stage2-a created again"), |l| l.contains(CREATED)).await?;
    let second = wait_kept(&config_maps, "stage2-a", &owner).await?;
    ensure!(first.metadata.uid != second.metadata.uid, tr!("the ConfigMap was not made anew"));
    // 3. drift → corrected.
    let drift = json!({"data": {"app.conf": "env=dev"}});
    config_maps.patch("stage2-a", &PatchParams::default(), &Patch::Merge(&drift)).await?;
    running.until(&tr!("the correction"), |l| l.contains(CORRECTED)).await?;
    let before = wait_kept(&config_maps, "stage2-a", &owner).await?;
    let mut printed = running.terminate().await?;
    // 4. rerun → nothing written.
    let mut rerun = Running::start_as(kubeconfig, "stage2_crd", |c| {
        c.env("RUST_LOG", "info,stage2_crd=debug")
    })?;
    rerun
        .until(&tr!("the rerun's quiet reconcile"), |l| l.contains("matches its template"))
        .await?;
    // No kick: a template made while it runs is itself the event.
    templates.create(&PostParams::default(), &template("template-b", "stage2-b")).await?;
    let b = templates.get("template-b").await?;
    wait_kept(&config_maps, "stage2-b", b.metadata.uid.as_deref().unwrap_or_default()).await?;
    let status = wait_ready(&templates, "template-a").await?;
    let theirs = not_ours(admin, &templates, &config_maps).await?;
    let held = nothing_recreated_while_deleting(&templates, &config_maps).await?;
    let second_run = rerun.terminate().await?;
    let wrote_a = |l: &&String| {
        l.contains("default/stage2-a ") && (l.contains(CORRECTED) || l.contains(CREATED))
    };
    if let Some(line) = second_run.iter().find(wrote_a) {
        bail!(tr!("the rerun wrote stage2-a while it was right: {line}", line));
    }
    let after = config_maps.get("stage2-a").await?;
    ensure!(
        after.metadata.resource_version == before.metadata.resource_version,
        tr!("the rerun moved stage2-a's resourceVersion")
    );
    printed.push(String::new());
    printed.push(
        "--- run again: RUST_LOG=info,stage2_crd=debug; template-b created meanwhile ---".into(),
    );
    printed.extend(second_run);
    write_sample("stage2_crd", &printed)?;
    let gc = garbage_collected(lab, &templates, &config_maps).await?;
    Ok(Measured::said(tr!(
        "{reviews}; start → created, delete → created, patch → corrected, rerun → nothing \
             written; template-b → its ConfigMap with no kick; {status}; {theirs}; {held}; {gc}",
        reviews,
        status,
        theirs,
        held,
        gc
    )))
}

/// Waits until `name` holds the template's data and names `owner` as its controller.
async fn wait_kept(api: &Api<ConfigMap>, name: &str, owner: &str) -> anyhow::Result<ConfigMap> {
    eventually(&tr!("{name} to hold its template's data", name), WITHIN, || async {
        Ok(match api.get_opt(name).await? {
            Some(cm) => {
                let owned = cm.metadata.owner_references.iter().flatten().any(|r| {
                    r.uid == owner && r.controller == Some(true) && r.kind == "ConfigMapTemplate"
                });
                if cm.data.as_ref() == Some(&data("prod")) && owned {
                    Check::Done(cm)
                } else {
                    Check::NotYet(tr!(
                        "data {data}, owners {owners}",
                        data = format!("{:?}", cm.data),
                        owners = format!("{:?}", cm.metadata.owner_references)
                    ))
                }
            }
            None => Check::NotYet(tr!("absent")),
        })
    })
    .await
}

/// Waits until the template's status says Ready for its current generation.
async fn wait_ready(api: &Api<ConfigMapTemplate>, name: &str) -> anyhow::Result<String> {
    eventually(&tr!("{name}'s status", name), WITHIN, || async {
        let t = api.get(name).await?;
        let status = t.status.clone().unwrap_or_default();
        let ready = status.conditions.iter().find(|c| c.type_ == READY && c.status == "True");
        Ok(match (ready, status.observed_generation == t.metadata.generation) {
            (Some(c), true) => Check::Done(tr!(
                "status Ready=True ({reason}), observedGeneration {generation}",
                reason = c.reason,
                generation = status.observed_generation.unwrap_or_default()
            )),
            _ => Check::NotYet(format!("{status:?}")),
        })
    })
    .await
}

/// A ConfigMap that is someone else's (no ownerReference of the template):
/// left as it is, the template Ready=False (NotOwned) for its generation
/// and a Warning Event; once it is gone, the template's own is made, Ready
/// turns True with a new lastTransitionTime, and a condition someone else
/// put in the status is still there.
async fn not_ours(
    admin: &Client,
    templates: &Api<ConfigMapTemplate>,
    config_maps: &Api<ConfigMap>,
) -> anyhow::Result<String> {
    let mine = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some("stage2-c".into()), ..Default::default() },
        data: Some(BTreeMap::from([("app.conf".into(), "mine".into())])),
        ..Default::default()
    };
    let mine = config_maps.create(&PostParams::default(), &mine).await?;
    templates.create(&PostParams::default(), &template("template-c", "stage2-c")).await?;
    let refused = wait_condition(templates, "template-c", "False", "NotOwned").await?;
    let now = config_maps.get("stage2-c").await?;
    ensure!(
        now.metadata.resource_version == mine.metadata.resource_version,
        tr!(
            "the template wrote a ConfigMap that is not its own: {data}",
            data = format!("{:?}", now.data)
        )
    );
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(admin.clone(), NAMESPACE);
    eventually(&tr!("a Warning Event NotOwned on template-c"), WITHIN, || async {
        let list = events.list(&ListParams::default()).await?;
        let found = list.items.iter().any(|e| {
            e.reason.as_deref() == Some("NotOwned")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("template-c")
        });
        Ok(Check::done_if(found, (), tr!("{count} Events", count = list.items.len())))
    })
    .await?;
    // Someone else's condition in the status (and an old transition time on
    // Ready, so that a new one shows); then the ConfigMap goes.
    let mut refused = refused;
    refused["lastTransitionTime"] = json!("2026-01-01T00:00:00Z");
    let other = json!({"status": {"conditions": [refused.clone(), {
        "type": "Audited", "status": "True", "reason": "ByHand", "message": "kept?",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    templates.patch_status("template-c", &PatchParams::default(), &Patch::Merge(&other)).await?;
    config_maps.delete("stage2-c", &DeleteParams::default()).await?;
    let c = templates.get("template-c").await?;
    wait_kept(config_maps, "stage2-c", c.metadata.uid.as_deref().unwrap_or_default()).await?;
    let ready = wait_condition(templates, "template-c", "True", "InSync").await?;
    ensure!(
        ready["lastTransitionTime"] != refused["lastTransitionTime"],
        tr!("Ready turned True but kept its old lastTransitionTime")
    );
    let status = templates.get("template-c").await?.status.unwrap_or_default();
    ensure!(
        status.conditions.iter().any(|c| c.type_ == "Audited"),
        tr!(
            "another condition was dropped: {conditions}",
            conditions = format!("{:?}", status.conditions)
        )
    );
    // Still Ready after a correction: the transition time stays.
    let drift = json!({"data": {"app.conf": "env=dev"}});
    config_maps.patch("stage2-c", &PatchParams::default(), &Patch::Merge(&drift)).await?;
    let c = templates.get("template-c").await?;
    wait_kept(config_maps, "stage2-c", c.metadata.uid.as_deref().unwrap_or_default()).await?;
    let still = wait_condition(templates, "template-c", "True", "InSync").await?;
    ensure!(
        still["lastTransitionTime"] == ready["lastTransitionTime"],
        tr!("Ready stayed True but its lastTransitionTime moved")
    );
    Ok(tr!("someone else's ConfigMap left alone (Ready=False NotOwned, a Warning Event); gone → \
         the template's own made, Ready=True, other conditions kept"))
}

/// Templates held by a finalizer while being deleted.
const HELD: [(&str, &str); 4] = [
    ("template-d0", "stage2-d0"),
    ("template-d1", "stage2-d1"),
    ("template-d2", "stage2-d2"),
    ("template-d3", "stage2-d3"),
];

/// A template being deleted (a finalizer holds it) does not recreate its
/// ConfigMap — also when the ConfigMap's delete reaches the controller before
/// the template's (two watches, no order between them): each template and its
/// ConfigMap are deleted back to back, several at once, to give that race its
/// chance.
async fn nothing_recreated_while_deleting(
    templates: &Api<ConfigMapTemplate>,
    config_maps: &Api<ConfigMap>,
) -> anyhow::Result<String> {
    for (name, config_map) in HELD {
        let mut held = template(name, config_map);
        held.metadata.finalizers = Some(vec!["e2e.lab/hold".into()]);
        let d = templates.create(&PostParams::default(), &held).await?;
        wait_kept(config_maps, config_map, d.metadata.uid.as_deref().unwrap_or_default()).await?;
    }
    futures::future::try_join_all(HELD.map(|(name, config_map)| async move {
        templates.delete(name, &DeleteParams::default()).await?;
        config_maps.delete(config_map, &DeleteParams::default()).await?;
        anyhow::Ok(())
    }))
    .await?;
    // Their resyncs and any event have their chance: the ConfigMaps stay gone.
    let watched = Duration::from_secs(3);
    throughout(watched, Duration::from_millis(200), || async {
        for (name, config_map) in HELD {
            if config_maps.get_opt(config_map).await?.is_some() {
                bail!(tr!("a template being deleted ({name}) recreated its ConfigMap", name));
            }
        }
        Ok(())
    })
    .await?;
    release_held(templates).await?;
    Ok(tr!(
        "{count} templates being deleted recreated nothing in {secs} s",
        count = HELD.len(),
        secs = watched.as_secs()
    ))
}

/// Takes the test's finalizer off the held templates, so they go.
async fn release_held(templates: &Api<ConfigMapTemplate>) -> kube::Result<()> {
    let release = json!({"metadata": {"finalizers": null}});
    for (name, _) in HELD {
        match templates.patch(name, &PatchParams::default(), &Patch::Merge(&release)).await {
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            other => drop(other?),
        }
    }
    Ok(())
}

/// Waits until the template's `Ready` condition has `status` and `reason`
/// for its current generation; the condition, as JSON.
async fn wait_condition(
    api: &Api<ConfigMapTemplate>,
    name: &str,
    status: &str,
    reason: &str,
) -> anyhow::Result<serde_json::Value> {
    eventually(&format!("{name}: Ready={status} ({reason})"), WITHIN, || async {
        let t = api.get(name).await?;
        let s = t.status.clone().unwrap_or_default();
        let ready = s.conditions.iter().find(|c| c.type_ == READY);
        Ok(match ready {
            Some(c)
                if c.status == status
                    && c.reason == reason
                    && c.observed_generation == t.metadata.generation =>
            {
                Check::Done(serde_json::to_value(c)?)
            }
            _ => Check::NotYet(format!("{s:?}")),
        })
    })
    .await
}

/// Deletes template-a: on kind the garbage collector removes stage2-a (its
/// ownerReference); envtest runs no kube-controller-manager, so it stays.
async fn garbage_collected(
    lab: &Lab,
    templates: &Api<ConfigMapTemplate>,
    config_maps: &Api<ConfigMap>,
) -> anyhow::Result<String> {
    let background = DeleteParams::background();
    templates.delete("template-a", &background).await?;
    // envtest's control plane is kube-apiserver and etcd alone: no kube-controller-manager.
    if lab.file().offers.local_control_plane {
        return Ok(tr!(
            "garbage collection not checked on envtest: it has no kube-controller-manager"
        ));
    }
    eventually(&tr!("stage2-a to be garbage-collected"), WITHIN, || async {
        Ok(match config_maps.get_opt("stage2-a").await? {
            None => Check::Done(tr!("template-a deleted → stage2-a garbage-collected")),
            Some(_) => Check::NotYet(tr!("still there")),
        })
    })
    .await
}

/// SubjectAccessReviews for the stage-2 ServiceAccount: what its Role grants
/// and nothing around it.
async fn least_privilege(admin: &Client) -> anyhow::Result<String> {
    let attrs = |group: &str, resource: &str, sub: &str, verb: &str| ResourceAttributes {
        subresource: Some(sub.to_string()).filter(|s| !s.is_empty()),
        ..labkit::accounts::access(group, resource, verb, Some(NAMESPACE))
    };
    let (group, mut checks) = ("lab.my-controller.dev", Vec::new());
    for verb in ["get", "list", "watch", "create", "update", "patch", "delete"] {
        let read = ["get", "list", "watch"].contains(&verb);
        checks.push((attrs(group, "configmaptemplates", "", verb), read));
        checks.push((attrs(group, "configmaptemplates", "status", verb), verb == "patch"));
        let cm = ["get", "list", "watch", "create", "update"].contains(&verb);
        checks.push((attrs("", "configmaps", "", verb), cm));
        let event = ["create", "patch"].contains(&verb);
        checks.push((attrs("events.k8s.io", "events", "", verb), event));
        checks.push((attrs("", "secrets", "", verb), false));
    }
    let account = format!("{NAMESPACE}/{ACCOUNT}");
    let wrong =
        crate::checks::least_privilege::wrong_answers(admin.clone(), &account, &checks).await?;
    ensure!(
        wrong.is_empty(),
        tr!(
            "the stage-2 Role differs from manifests/stage2/rbac.yaml: {wrong}",
            wrong = wrong.join("; ")
        )
    );
    Ok(tr!("{count} reviews of its ServiceAccount as its Role says", count = checks.len()))
}

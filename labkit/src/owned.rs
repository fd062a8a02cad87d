//! Making and deleting objects as a [`Record`]'s owner, never anyone
//! else's: what Helm and kubectl's ApplySets do with owner labels and uid
//! preconditions.
//!
//! [`apply`] creates an object that is not there (a create, which the API
//! server refuses when someone made one meanwhile) and updates one only
//! when the record claims it, its uid in the update so the API server
//! refuses another object of the same name. [`in_the_way`] says, before
//! anything is made, which objects of the names a command would make exist
//! and are not the record's. [`delete`] deletes with the recorded uid as a
//! precondition; an object that is someone else's is left alone and named.

use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams, Preconditions};
use serde_json::{Value, json};

use crate::apply::{identify, identify_object, patch, typed};
use crate::eventually::{Check, eventually};
use crate::lab_file::Applied;
use crate::record::{Collection, Entry, How, OWNER_LABEL, Record};
use crate::tr;

/// Creates `document`, or updates it when `record` claims it, as
/// `field_manager`; recorded (before the create, and with its uid after)
/// as made by `by`. An object of its name that `record` does not claim
/// stops it, in one line naming the object and its owner.
pub async fn apply(
    client: &kube::Client,
    record: &mut Record,
    by: &str,
    field_manager: &str,
    mut document: Value,
) -> Result<Applied> {
    let (object, api) = identify(client, &document).await?;
    let labels = &mut document["metadata"]["labels"];
    if !(labels.is_null() || labels.is_object()) {
        bail!(tr!("{object}: its metadata.labels is not a mapping; fix its manifest", object));
    }
    for (key, value) in record.labels() {
        labels[key] = json!(value);
    }
    let live =
        api.get_opt(&object.name).await.with_context(|| tr!("cannot read {object}", object))?;
    if let Some(live) = &live {
        let uid = live.metadata.uid.clone();
        if !record.claims(&object, uid.as_deref(), live.metadata.labels.as_ref()) {
            bail!("{}", not_ours(&object, live));
        }
        // The uid in the update: another object of this name is refused by the API server.
        document["metadata"]["uid"] = json!(uid);
    }
    record.intend(&object, by, How::Created)?;
    let made = match live {
        None => {
            let params =
                PostParams { field_manager: Some(field_manager.into()), ..Default::default() };
            api.create(&params, &typed(document)?).await.map_err(|e| match e {
                kube::Error::Api(s) if s.code == 409 => {
                    anyhow::anyhow!(tr!(
                        "{object} was made by someone else a moment ago: left alone",
                        object
                    ))
                }
                e => anyhow::Error::new(e).context(tr!("cannot create {object}", object)),
            })?
        }
        Some(_) => patch(&api, &object, field_manager, document).await?,
    };
    let uid = made.metadata.uid.with_context(|| tr!("the API server answered without a uid"))?;
    record.made(&object, &uid)?;
    crate::progress!("{}", tr!("  applied {object}", object));
    Ok(object)
}

/// One line for an object of that name that is not this owner's: whose it is.
pub fn not_ours(object: &Applied, live: &DynamicObject) -> String {
    let labels = live.metadata.labels.as_ref();
    let whose = match labels.and_then(|l| l.get(OWNER_LABEL)) {
        Some(owner) => {
            tr!("it belongs to {owner}, by its label {label}", owner, label = OWNER_LABEL)
        }
        None => {
            let managers: Vec<String> = live
                .metadata
                .managed_fields
                .iter()
                .flatten()
                .filter_map(|m| m.manager.clone())
                .collect();
            match managers.is_empty() {
                true => tr!("made by someone else"),
                false => tr!("managed by {managers}", managers = managers.join(", ")),
            }
        }
    };
    tr!("{object} is there already and this lab did not make it ({whose})", object, whose)
}

/// Whether `live` is `record`'s: claimed ([`Record::claims`]), or a ConfigMap a controller of
/// the owner's keeps (`how` it was recorded), made or made anew by it: a heal gives it a new
/// uid and no owner label, so one carrying an owner's label (a copy's) is not a heal.
fn ours(record: &Record, object: &Applied, live: &DynamicObject, how: Option<How>) -> bool {
    let labels = live.metadata.labels.as_ref();
    let healed = how == Some(How::ByController)
        && labels.is_none_or(|labels| !labels.contains_key(OWNER_LABEL));
    healed || record.claims(object, live.metadata.uid.as_deref(), labels)
}

/// Of `objects` (as [`Applied`]), each that exists and that `record` does
/// not claim: one line each ([`not_ours`]). A 403 is one too: what cannot
/// be read cannot be known to be free.
pub async fn in_the_way(
    client: &kube::Client,
    record: &Record,
    objects: &[Applied],
) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for object in objects {
        let (object, api) = identify_object(client, object.clone()).await?;
        let how = record.find(&object).map(|e| e.how);
        match api.get_opt(&object.name).await {
            Ok(Some(live)) if !ours(record, &object, &live, how) => {
                lines.push(not_ours(&object, &live));
            }
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 403 => {
                lines.push(tr!(
                    "{object} cannot be read with these rights ({message})",
                    object,
                    message = s.message
                ));
            }
            Err(e) => return Err(e).with_context(|| tr!("cannot read {object}", object)),
        }
    }
    Ok(lines)
}

/// How a [`delete`] went.
#[derive(Debug, PartialEq, Eq)]
pub enum Deleted {
    /// Deleted, and gone.
    Deleted,
    /// Not there (any more).
    Gone,
    /// Left alone: the object of that name is not this owner's (why).
    LeftAlone(String),
}

/// Deletes `entry`'s object (a Deployment with its pods), if it is this owner's, and
/// waits until it is gone; then forgets it. The recorded uid is the
/// delete's precondition: the API server refuses another object of the name.
pub async fn delete(
    client: &kube::Client,
    record: &mut Record,
    entry: &Entry,
    within: Duration,
) -> Result<Deleted> {
    let (object, api) = identify_object(client, entry.object.clone()).await?;
    let deleted = 'deleted: {
        let uid = match (&entry.uid, entry.how) {
            (Some(uid), How::Created) => uid.clone(),
            // Not recorded yet (a create cut short), or made by the controller:
            // what is there now, if it is this owner's.
            _ => match api.get_opt(&object.name).await? {
                None => break 'deleted Deleted::Gone,
                Some(live) if !ours(record, &object, &live, Some(entry.how)) => {
                    break 'deleted Deleted::LeftAlone(not_ours(&object, &live));
                }
                Some(live) => live.metadata.uid.unwrap_or_default(),
            },
        };
        // A Deployment goes with its pods (foreground: gone means its controller
        // has stopped); anything else at once — without a garbage collector (an
        // envtest lab) a foreground deletion would never finish.
        let propagation = match object.kind.as_str() {
            "Deployment" => DeleteParams::foreground(),
            _ => DeleteParams::background(),
        };
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: Some(uid.clone()), resource_version: None }),
            ..propagation
        };
        match api.delete(&object.name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => break 'deleted Deleted::Gone,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                break 'deleted Deleted::LeftAlone(tr!(
                    "{object} is not the one this lab made (uid {uid}): someone made it again; left alone",
                    object,
                    uid
                ));
            }
            Err(e) => return Err(e).with_context(|| tr!("cannot delete {object}", object)),
        }
        gone(&api, &object, &uid, within).await?;
        Deleted::Deleted
    };
    // Gone, deleted, or someone else's: no longer this owner's to delete.
    record.forget(&entry.object)?;
    Ok(deleted)
}

/// Until no object of `object`'s name has `uid` (a new one of the name is not ours to wait for).
async fn gone(
    api: &Api<DynamicObject>,
    object: &Applied,
    uid: &str,
    within: Duration,
) -> Result<()> {
    let what = tr!("{object} to be gone", object);
    eventually(&what, within, || async {
        Ok(match api.get_opt(&object.name).await? {
            Some(left) if left.metadata.uid.as_deref() == Some(uid) => Check::NotYet(tr!(
                "still there, finalizers {finalizers}",
                finalizers = format!("{:?}", left.metadata.finalizers.unwrap_or_default())
            )),
            _ => Check::Done(()),
        })
    })
    .await
}

/// Deletes, newest first, each entry of `record` that `which` selects
/// ([`delete`]), saying what it did; every one is tried. Returns the lines
/// of what was left alone; the first failure is the error.
pub async fn delete_all(
    client: &kube::Client,
    record: &mut Record,
    which: impl Fn(&Entry) -> bool,
    within: Duration,
) -> Result<Vec<String>> {
    let entries: Vec<Entry> = record.entries.iter().rev().filter(|e| which(e)).cloned().collect();
    let (mut left, mut failed) = (Vec::new(), None);
    for entry in entries {
        match delete(client, record, &entry, within).await {
            Ok(Deleted::Deleted) => {
                crate::progress!("{}", tr!("  deleted {object}", object = entry.object));
            }
            Ok(Deleted::Gone) => {
                crate::progress!("{}", tr!("  {object} was gone already", object = entry.object));
            }
            Ok(Deleted::LeftAlone(why)) => {
                eprintln!("{}", tr!("  left alone: {why}", why));
                left.push(why);
            }
            Err(e) => {
                let (object, error) = (&entry.object, format!("{e:#}"));
                eprintln!("{}", tr!("  could not delete {object}: {error}", object, error));
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(left),
    }
}

/// Deletes every object of `collection` (a deletecollection with its label
/// selector, repeated: the API server deletes one at a time and may end the
/// request at its timeout) and waits until none is left.
pub async fn delete_collection(
    client: &kube::Client,
    collection: &Collection,
    within: Duration,
) -> Result<()> {
    let object = Applied {
        api_version: collection.api_version.clone(),
        kind: collection.kind.clone(),
        namespace: Some(collection.namespace.clone()),
        name: String::new(),
    };
    let (_, api) = identify_object(client, object).await?;
    let selector = ListParams::default().labels(&collection.selector);
    let what = tr!(
        "{kind} -l {selector} to be gone",
        kind = collection.kind,
        selector = collection.selector
    );
    eventually(&what, within, || async {
        // A timeout here is expected for a large collection: count and repeat.
        let _ = api.delete_collection(&DeleteParams::default(), &selector).await;
        let left = api.list_metadata(&selector).await?.items.len();
        Ok(Check::done_if(left == 0, (), tr!("{left} left", left)))
    })
    .await
}

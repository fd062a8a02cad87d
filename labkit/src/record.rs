//! The one record of what the kit made on a cluster: `record.json` in a
//! lab's (or a room's) state directory.
//!
//! An object goes into the record *before* it is created, without a uid,
//! and again with the uid the API server gave it once the create was
//! answered; every object also carries the record's owner as a label
//! ([`OWNER_LABEL`]). So a command killed at any point leaves a record that
//! the next `up` or `down` completes or undoes: an object whose create was
//! answered but not yet recorded is still known as this owner's by its
//! label, and one never created is simply not found. `down` deletes only
//! what the record names, with the recorded uid as a precondition
//! ([`crate::owned`]); an object of the same name with another uid, or
//! another owner's, is left alone and named.
//!
//! While `grade` or `bench` has taken the lab's controller away, the record
//! also says so ([`Borrow`]): which process groups run and what it made by
//! the many, its token files in one folder, so that whatever ended that
//! command, the next one puts the lab back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

use crate::lab_file::Applied;
use crate::process::{self, Group};
use crate::{files, tr};

/// A record shared by a command and the work it runs (a borrow's program, its grants).
pub type Shared = std::sync::Arc<tokio::sync::Mutex<Record>>;

/// Bumped when a reader of an older record would misread this one.
pub const FORMAT: u32 = 1;
pub const FILE_NAME: &str = "record.json";
/// The label naming an object's owner: `kubectl get all -l lab-kit.dev/owner=ID`.
pub const OWNER_LABEL: &str = "lab-kit.dev/owner";
/// The label every tool reads as "who manages this" (Helm's convention).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "my-controller-lab-kit";

/// What is made of whom: one lab or one room.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Record {
    pub format: u32,
    /// `<name>-<8 hex>`: this lab or room, not any other of the kit's, on
    /// this cluster or another (the label's value).
    pub owner: String,
    /// The lab's provider, by name (`None` for a room).
    #[serde(default)]
    pub provider: Option<String>,
    /// What was made, in order: the newest last.
    pub entries: Vec<Entry>,
    /// Set while `grade` or `bench` has the lab's controller stopped.
    #[serde(default)]
    pub borrow: Option<Borrow>,
    #[serde(skip)]
    path: PathBuf,
}

/// One thing made on the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    #[serde(flatten)]
    pub object: Applied,
    /// The uid the API server gave it (a kind cluster: its node container's
    /// ID); `None` until the create was answered.
    pub uid: Option<String>,
    /// The command that made it: `lab up`, `grade`, `bench`, `room up`, …
    pub by: String,
    pub how: How,
}

/// How an entry came to be this owner's, which says how `down` knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    /// Created by the kit: its uid, else its owner label.
    Created,
    /// A ConfigMap a controller of the owner's keeps: the lab's my-config
    /// (made by `lab up` before the controller starts, its uid recorded), a
    /// bench side's (recorded before the side makes it). Each heal makes it
    /// anew with a new uid and no owner label, which `down` deletes once the
    /// controller is gone ([`crate::owned`]).
    ByController,
}

/// `grade` or `bench` has the lab's controller stopped; what it runs
/// meanwhile. The files holding its tokens are in [`BORROWED_DIR`] next to
/// the record, removed whole when the lab is put back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Borrow {
    /// `grade` or `bench`.
    pub by: String,
    /// The binary it runs as (`xtask`, `maint`): `cargo {program} {by}` is
    /// what was typed.
    #[serde(default = "xtask")]
    pub program: String,
    /// The process that borrowed the lab.
    pub pid: u32,
    /// Seconds since the Unix epoch.
    pub since_unix: u64,
    /// Process groups it started (the program under grade, the bench's sides).
    pub groups: Vec<Group>,
    /// Objects it made by the many, found by their labels (each with the
    /// owner's): the bench's unrelated ConfigMaps.
    #[serde(default)]
    pub collections: Vec<Collection>,
}

/// Records written before [`Borrow::program`] were xtask's.
fn xtask() -> String {
    "xtask".into()
}

/// Objects of one kind in one namespace that carry `selector`'s labels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collection {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    /// `key=value,…`, the owner's label among them.
    pub selector: String,
}

/// Where a borrower's token files go, next to the record: removed whole.
pub const BORROWED_DIR: &str = "borrowed";

impl Record {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(FILE_NAME)
    }

    /// The record in `dir`, if there is one.
    pub fn load(dir: &Path) -> Result<Option<Record>> {
        let path = Self::path(dir);
        let Some(text) = files::read_if_there(&path)? else { return Ok(None) };
        let mut record: Record = serde_json::from_str(&text)
            .with_context(|| tr!("{path} is not a record of the kit", path = path.display()))?;
        if record.format != FORMAT {
            bail!(tr!(
                "{path} has format {format}, this xtask reads {ours}: remove what it names by hand",
                path = path.display(),
                format = record.format,
                ours = FORMAT
            ));
        }
        record.path = path;
        Ok(Some(record))
    }

    /// The record in `dir`, or a new one for `name` (written at its first entry).
    pub fn open(dir: &Path, name: &str, provider: Option<&str>) -> Result<Record> {
        Ok(match Self::load(dir)? {
            Some(record) => record,
            None => Record {
                format: FORMAT,
                owner: new_owner(name)?,
                provider: provider.map(str::to_string),
                path: Self::path(dir),
                ..Record::default()
            },
        })
    }

    /// Where it is written.
    pub fn file(&self) -> &Path {
        &self.path
    }

    /// The labels every object this owner makes carries.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (OWNER_LABEL.to_string(), self.owner.clone()),
            (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
        ])
    }

    /// The entry of kind `kind` named `namespace/name`, whatever its API version.
    pub fn find_named(&self, kind: &str, namespace: &str, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| {
            e.object.kind == kind
                && e.object.namespace.as_deref() == Some(namespace)
                && e.object.name == name
        })
    }

    pub fn find(&self, object: &Applied) -> Option<&Entry> {
        self.entries.iter().find(|e| e.object == *object)
    }

    /// `object` is about to be made by `by`: recorded (and written) first.
    pub fn intend(&mut self, object: &Applied, by: &str, how: How) -> Result<()> {
        if self.find(object).is_none() {
            let entry = Entry { object: object.clone(), uid: None, by: by.into(), how };
            self.entries.push(entry);
        }
        self.save()
    }

    /// `object` was made (or found to be this owner's) with `uid`.
    pub fn made(&mut self, object: &Applied, uid: &str) -> Result<()> {
        let entry = self
            .entries
            .iter_mut()
            .find(|e| e.object == *object)
            .with_context(|| tr!("{object} was not recorded before it was made", object))?;
        entry.uid = Some(uid.to_string());
        self.save()
    }

    /// `object`, made and recorded with its uid, is from now on kept by the
    /// owner's controller, which heals it ([`How::ByController`]).
    pub fn kept_by_controller(&mut self, object: &Applied) -> Result<()> {
        let entry = self.entries.iter_mut().find(|e| e.object == *object);
        entry.into_iter().for_each(|e| e.how = How::ByController);
        self.save()
    }

    /// `object` is gone: no longer this owner's to delete.
    pub fn forget(&mut self, object: &Applied) -> Result<()> {
        self.entries.retain(|e| e.object != *object);
        self.save()
    }

    /// Whether an object found on the cluster as `object`, with `uid` and
    /// `labels`, is this owner's: its recorded uid, or (a create answered but
    /// not recorded) its owner label; once a uid is recorded, a copied label
    /// makes nothing this owner's.
    pub fn claims(
        &self,
        object: &Applied,
        uid: Option<&str>,
        labels: Option<&BTreeMap<String, String>>,
    ) -> bool {
        let recorded = self.find(object).and_then(|e| e.uid.as_deref());
        let labelled = labels.and_then(|l| l.get(OWNER_LABEL)).is_some_and(|o| *o == self.owner);
        match recorded {
            Some(recorded) => uid == Some(recorded),
            None => labelled,
        }
    }

    /// Written whole (a partial file renamed in): a crash never leaves half a record.
    pub fn save(&self) -> Result<()> {
        let parent = self.path.parent().with_context(|| tr!("the record has no folder"))?;
        crate::files::create_dir(parent)?;
        let partial = self.path.with_extension("json.partial");
        files::write_private(&partial, serde_json::to_string_pretty(self)? + "\n")?;
        std::fs::rename(&partial, &self.path)
            .with_context(|| tr!("cannot write {path}", path = self.path.display()))
    }

    /// Shared with the work that adds to it.
    pub fn shared(self) -> Shared {
        std::sync::Arc::new(tokio::sync::Mutex::new(self))
    }

    /// A process group the borrower started (`pid` leads it), recorded at once.
    pub fn started(&mut self, pid: u32) -> Result<()> {
        let group =
            process::group_of(pid).with_context(|| tr!("the started process is gone already"))?;
        self.borrow.get_or_insert_with(Borrow::default).groups.push(group);
        self.save()
    }

    /// Objects the borrower makes by the many (see [`Borrow::collections`]).
    pub fn collection(&mut self, collection: Collection) -> Result<()> {
        let borrow = self.borrow.get_or_insert_with(Borrow::default);
        if !borrow.collections.contains(&collection) {
            borrow.collections.push(collection);
        }
        self.save()
    }

    /// The borrower's folder for token files ([`BORROWED_DIR`]).
    pub fn borrowed_dir(&self) -> PathBuf {
        self.path.parent().unwrap_or(Path::new(".")).join(BORROWED_DIR)
    }

    /// Nothing is left to undo: the file goes.
    pub fn remove(self) -> Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| tr!("cannot remove {path}", path = self.path.display()))
            }
            _ => Ok(()),
        }
    }
}

/// `<name>-<8 hex>`, the hex from the system's random source: two labs of
/// the same name (two laptops, one cluster) are two owners.
fn new_owner(name: &str) -> Result<String> {
    // A label value is at most 63 characters: lab and room names are at most 40.
    let name: String = name.chars().take(54).collect();
    Ok(format!("{name}-{}", random_hex::<4>()?))
}

/// `N` bytes of the system's random source (which does not fail on Linux or macOS), in hex.
pub fn random_hex<const N: usize>() -> Result<String> {
    let random = ring::rand::generate::<[u8; N]>(&ring::rand::SystemRandom::new())
        .map_err(|_| anyhow::anyhow!(tr!("the system's random source failed")))?;
    Ok(random.expose().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str) -> Applied {
        Applied {
            api_version: "v1".into(),
            kind: "ServiceAccount".into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    fn dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("labkit-record-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn an_object_is_recorded_before_it_is_made_and_read_back_after_a_crash() {
        let dir = dir("crash");
        let mut record = Record::open(&dir, "lab", Some("existing")).unwrap();
        assert!(!Record::path(&dir).exists(), "nothing is written before the first entry");
        record.intend(&object("a"), "lab up", How::Created).unwrap();
        // Killed here: the next command reads the intent, without a uid.
        let read = Record::load(&dir).unwrap().unwrap();
        assert_eq!(read.owner, record.owner);
        assert_eq!(read.find(&object("a")).unwrap().uid, None);
        record.made(&object("a"), "uid-1").unwrap();
        let read = Record::load(&dir).unwrap().unwrap();
        assert_eq!(read.find(&object("a")).unwrap().uid.as_deref(), Some("uid-1"));
        record.forget(&object("a")).unwrap();
        assert!(Record::load(&dir).unwrap().unwrap().entries.is_empty());
        record.remove().unwrap();
        assert!(Record::load(&dir).unwrap().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_the_recorded_uid_or_the_owners_label_claims_an_object() {
        let dir = dir("claims");
        let mut record = Record::open(&dir, "lab", None).unwrap();
        let other = Record::open(&dir, "lab", None).unwrap();
        assert_ne!(record.owner, other.owner, "two labs of one name are two owners");
        assert!(record.owner.starts_with("lab-") && record.owner.len() == "lab-".len() + 8);
        let (a, b) = (object("a"), object("b"));
        record.intend(&a, "lab up", How::Created).unwrap();
        // Intended, create answered, uid not yet recorded: the label tells.
        assert!(record.claims(&a, Some("u1"), Some(&record.labels())));
        assert!(!record.claims(&a, Some("u1"), Some(&other.labels())), "another lab's");
        assert!(!record.claims(&a, Some("u1"), None), "someone's without labels");
        record.made(&a, "u1").unwrap();
        assert!(record.claims(&a, Some("u1"), None));
        assert!(!record.claims(&a, Some("u2"), None), "made again by someone else");
        let copied = Some(&record.labels());
        assert!(!record.claims(&a, Some("u2"), copied), "made again, the owner's label copied");
        assert!(!record.claims(&b, Some("u1"), None), "never recorded");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_borrow_recorded_before_its_program_was_xtasks() {
        let old = r#"{"by":"grade","pid":7,"since_unix":1,"groups":[]}"#;
        let borrow: Borrow = serde_json::from_str(old).unwrap();
        assert_eq!((borrow.by.as_str(), borrow.program.as_str()), ("grade", "xtask"));
    }

    #[test]
    fn a_long_name_still_makes_a_label_value() {
        let owner = new_owner(&"a".repeat(80)).unwrap();
        assert!(owner.len() <= 63, "{owner}");
    }
}

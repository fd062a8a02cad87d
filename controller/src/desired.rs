//! The desired ConfigMap: what the controller keeps alive, and the checks on it.
//!
//! Course, stage 1, step 4: the tutorial's controller hard-codes
//! `default/my-config` with `app.conf: "env=prod\nreplicas=3"`. Here those are
//! the defaults, and flags may override them; every override is validated
//! before the controller talks to any API server, so bad input never causes a
//! partial write.

use std::{collections::BTreeMap, fmt, path::Path};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

/// The namespace of the course's ConfigMap.
pub const DEFAULT_NAMESPACE: &str = "default";
/// The name of the course's ConfigMap.
pub const DEFAULT_NAME: &str = "my-config";
/// The key of the course's single data entry.
pub const DEFAULT_KEY: &str = "app.conf";
/// The value the course's controller puts back.
pub const DEFAULT_VALUE: &str = "env=prod\nreplicas=3";

/// A ConfigMap (keys and values together) may not exceed 1 MiB: the API server
/// rejects larger ones, so the controller refuses them up front.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

/// What is wrong with a requested desired state. Each message is one line that
/// names the problem and what to do.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidDesired {
    #[error(
        "invalid namespace {0:?}: must be a lowercase RFC 1123 label (a-z, 0-9, '-', at most 63 characters, starting and ending alphanumeric)"
    )]
    Namespace(String),
    #[error(
        "invalid ConfigMap name {0:?}: must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-', '.', at most 253 characters, starting and ending alphanumeric)"
    )]
    Name(String),
    #[error(
        "invalid data key {0:?}: keys may hold only letters, digits, '-', '_' and '.', at most 253 characters, and may not be '.' or '..'"
    )]
    Key(String),
    #[error("invalid --data {0:?}: expected key=value")]
    Pair(String),
    #[error("data key {0:?} is given twice: give each key once")]
    DuplicateKey(String),
    #[error(
        "desired data is {size} bytes, over the 1 MiB ({MAX_DATA_BYTES} bytes) ConfigMap limit: shrink it"
    )]
    TooLarge { size: usize },
    #[error("data file {path}: {reason}")]
    File { path: String, reason: String },
}

/// The desired ConfigMap. `data` is the whole truth: keys that are not here are
/// removed from the live object, values that differ are put back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    namespace: String,
    name: String,
    data: BTreeMap<String, String>,
}

#[cfg(test)]
impl Default for Desired {
    /// Exactly the course's ConfigMap.
    fn default() -> Self {
        Self {
            namespace: DEFAULT_NAMESPACE.into(),
            name: DEFAULT_NAME.into(),
            data: default_data(),
        }
    }
}

/// The course's data: `{"app.conf": "env=prod\nreplicas=3"}`.
pub fn default_data() -> BTreeMap<String, String> {
    BTreeMap::from([(DEFAULT_KEY.to_string(), DEFAULT_VALUE.to_string())])
}

impl Desired {
    /// Checks and builds a desired state. Nothing is written anywhere before
    /// this has succeeded.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        data: BTreeMap<String, String>,
    ) -> Result<Self, InvalidDesired> {
        let (namespace, name) = (namespace.into(), name.into());
        if !is_dns1123_label(&namespace) {
            return Err(InvalidDesired::Namespace(namespace));
        }
        if !is_dns1123_subdomain(&name) {
            return Err(InvalidDesired::Name(name));
        }
        if let Some(bad) = data.keys().find(|k| !is_config_map_key(k)) {
            return Err(InvalidDesired::Key(bad.clone()));
        }
        let size: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
        if size > MAX_DATA_BYTES {
            return Err(InvalidDesired::TooLarge { size });
        }
        Ok(Self { namespace, name, data })
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn data(&self) -> &BTreeMap<String, String> {
        &self.data
    }

    /// True when `live` already holds exactly the desired data, and no
    /// `binaryData` (the same key space, which [`Desired::corrected`] clears):
    /// what this checks is exactly what a correction would change, so "right"
    /// and "corrected" cannot disagree. ConfigMaps have no
    /// `metadata.generation`, so the data itself is what is compared.
    pub fn is_satisfied_by(&self, live: &ConfigMap) -> bool {
        let data = match &live.data {
            Some(data) => data == &self.data,
            None => self.data.is_empty(),
        };
        data && live.binary_data.as_ref().is_none_or(BTreeMap::is_empty)
    }

    /// A fresh object to create when none exists.
    pub fn to_config_map(&self) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            data: Some(self.data.clone()),
            ..ConfigMap::default()
        }
    }

    /// The corrected object: `live` with the desired data and everything else
    /// (labels, annotations, resourceVersion) kept.
    ///
    /// The course says "DeepCopy before you modify": the cache hands out
    /// `Arc<ConfigMap>`, which cannot be modified at all, so the Rust version of
    /// that rule is this owned clone.
    pub fn corrected(&self, live: &ConfigMap) -> ConfigMap {
        let mut owned = live.clone();
        owned.data = Some(self.data.clone());
        // binaryData is part of the same key space and not ours to keep: the
        // desired data is the whole truth.
        owned.binary_data = None;
        owned
    }
}

impl fmt::Display for Desired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Parses `key=value` pairs given with repeated `--data`.
pub fn parse_pairs<S: AsRef<str>>(pairs: &[S]) -> Result<BTreeMap<String, String>, InvalidDesired> {
    let mut data = BTreeMap::new();
    for pair in pairs {
        let pair = pair.as_ref();
        let (key, value) = pair
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| InvalidDesired::Pair(pair.to_string()))?;
        if data.insert(key.to_string(), value.to_string()).is_some() {
            return Err(InvalidDesired::DuplicateKey(key.to_string()));
        }
    }
    Ok(data)
}

/// Parses a data file: a YAML or JSON mapping of string keys to string values
/// (JSON is read by the YAML parser: it is a subset). The size is checked
/// before the file is read, so a huge file is refused without loading it.
pub fn read_data_file(path: &Path) -> Result<BTreeMap<String, String>, InvalidDesired> {
    let fail = |reason: String| InvalidDesired::File { path: path.display().to_string(), reason };
    let len = std::fs::metadata(path).map_err(|e| fail(format!("cannot read it ({e})")))?.len();
    // The file's own syntax takes some bytes, but data this large can never fit.
    if len > 2 * MAX_DATA_BYTES as u64 {
        return Err(InvalidDesired::TooLarge { size: len as usize });
    }
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read it ({e})")))?;
    parse_data(&text).map_err(fail)
}

/// Parses the text of a data file (see [`read_data_file`]).
pub fn parse_data(text: &str) -> Result<BTreeMap<String, String>, String> {
    let value: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| {
        format!("not valid YAML or JSON: {}", e.to_string().lines().next().unwrap_or(""))
    })?;
    let serde_json::Value::Object(map) = value else {
        return Err(
            "expected a mapping of keys to string values, like `app.conf: \"env=prod\"`".into()
        );
    };
    map.into_iter()
        .map(|(key, value)| match value {
            serde_json::Value::String(s) => Ok((key, s)),
            other => Err(format!("the value of {key:?} is {other}, not a string: quote it")),
        })
        .collect()
}

/// RFC 1123 label, as Kubernetes checks namespaces.
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

/// RFC 1123 subdomain, as Kubernetes checks most object names.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// A ConfigMap data key: `[-._a-zA-Z0-9]+`, at most 253, not `.` or `..`.
pub fn is_config_map_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s != "."
        && s != ".."
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_course_config_map() {
        let d = Desired::default();
        assert_eq!(d.to_string(), "default/my-config");
        assert_eq!(d.data()["app.conf"], "env=prod\nreplicas=3");
        assert_eq!(d.data().len(), 1);
    }

    #[test]
    fn names_follow_rfc_1123() {
        assert!(is_dns1123_label("default"));
        assert!(is_dns1123_label("a-1"));
        for bad in ["", "Default", "-a", "a-", "a.b", "a_b", &"a".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad:?} accepted as a label");
        }
        assert!(is_dns1123_subdomain("my-config"));
        assert!(is_dns1123_subdomain("my.config.v1"));
        for bad in ["", "My-config", "a..b", ".a", "a.", "a_b"] {
            assert!(!is_dns1123_subdomain(bad), "{bad:?} accepted as a name");
        }
        assert_eq!(
            Desired::new("Bad_NS", "ok", default_data()),
            Err(InvalidDesired::Namespace("Bad_NS".into()))
        );
        assert_eq!(
            Desired::new("ok", "bad/name", default_data()),
            Err(InvalidDesired::Name("bad/name".into()))
        );
    }

    #[test]
    fn data_keys_are_checked() {
        for good in ["app.conf", "A_b-c.1", ".hidden"] {
            assert!(is_config_map_key(good));
        }
        for bad in ["", ".", "..", "a/b", "a b", "ü"] {
            let data = BTreeMap::from([(bad.to_string(), "v".to_string())]);
            assert_eq!(Desired::new("default", "x", data), Err(InvalidDesired::Key(bad.into())));
        }
    }

    #[test]
    fn the_1_mib_limit_counts_keys_and_values() {
        let at_limit = BTreeMap::from([("k".to_string(), "v".repeat(MAX_DATA_BYTES - 1))]);
        assert!(Desired::new("default", "x", at_limit).is_ok());
        let over = BTreeMap::from([("k".to_string(), "v".repeat(MAX_DATA_BYTES))]);
        assert_eq!(
            Desired::new("default", "x", over),
            Err(InvalidDesired::TooLarge { size: MAX_DATA_BYTES + 1 })
        );
    }

    #[test]
    fn pairs_split_on_the_first_equals_sign() {
        let data = parse_pairs(&["app.conf=env=prod", "empty="]).unwrap();
        assert_eq!(data["app.conf"], "env=prod");
        assert_eq!(data["empty"], "");
        assert_eq!(parse_pairs(&["novalue"]), Err(InvalidDesired::Pair("novalue".into())));
        assert_eq!(parse_pairs(&["=v"]), Err(InvalidDesired::Pair("=v".into())));
        assert_eq!(parse_pairs(&["a=1", "a=2"]), Err(InvalidDesired::DuplicateKey("a".into())));
    }

    #[test]
    fn data_files_are_yaml_or_json_maps_of_strings() {
        let yaml = parse_data("app.conf: |\n  env=prod\n  replicas=3\nother: \"x\"\n").unwrap();
        assert_eq!(yaml["app.conf"], "env=prod\nreplicas=3\n");
        assert_eq!(yaml["other"], "x");
        let json = parse_data(r#"{"app.conf": "env=prod\nreplicas=3"}"#).unwrap();
        assert_eq!(json, default_data());

        assert!(parse_data("- a\n- b\n").unwrap_err().contains("mapping"));
        assert!(parse_data("replicas: 3\n").unwrap_err().contains("quote it"));
        assert!(parse_data("a: [unclosed\n").unwrap_err().starts_with("not valid YAML"));
    }

    #[test]
    fn data_files_over_the_limit_are_refused_before_reading() {
        let dir = std::env::temp_dir().join(format!("desired-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.yaml");
        std::fs::write(&big, format!("k: \"{}\"\n", "v".repeat(2 * MAX_DATA_BYTES))).unwrap();
        assert!(matches!(read_data_file(&big), Err(InvalidDesired::TooLarge { .. })));
        // Under the file guard but over the data limit: caught by Desired::new.
        let near = dir.join("near.yaml");
        std::fs::write(&near, format!("k: \"{}\"\n", "v".repeat(MAX_DATA_BYTES + 10))).unwrap();
        let data = read_data_file(&near).unwrap();
        assert!(matches!(Desired::new("default", "x", data), Err(InvalidDesired::TooLarge { .. })));
        let missing = dir.join("missing.yaml");
        let err = read_data_file(&missing).unwrap_err().to_string();
        assert!(err.contains("missing.yaml") && err.contains("cannot read"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every live object a correction meets: "right" holds exactly when the
    /// correction would change nothing it looks at, and a corrected object is
    /// right.
    #[test]
    fn right_and_corrected_agree_on_every_field() {
        let d = Desired::default();
        let binary = |k: &str| {
            Some(BTreeMap::from([(k.to_string(), k8s_openapi::ByteString(b"x".to_vec()))]))
        };
        let mut cases = Vec::new();
        for data in [
            None,
            Some(BTreeMap::new()),
            Some(default_data()),
            Some(parse_pairs(&["app.conf=env=dev"]).unwrap()),
        ] {
            for binary_data in [None, Some(BTreeMap::new()), binary("blob")] {
                let mut live = d.to_config_map();
                live.data = data.clone();
                live.binary_data = binary_data;
                cases.push(live);
            }
        }
        for live in cases {
            let fixed = d.corrected(&live);
            assert!(d.is_satisfied_by(&fixed), "a corrected object is right: {fixed:?}");
            let would_change = fixed.data != live.data
                || fixed.binary_data.unwrap_or_default()
                    != live.binary_data.clone().unwrap_or_default();
            assert_eq!(d.is_satisfied_by(&live), !would_change, "{live:?}");
        }
    }

    #[test]
    fn comparison_is_on_data_only() {
        let d = Desired::default();
        let mut live = d.to_config_map();
        live.metadata.resource_version = Some("7".into());
        live.metadata.labels = Some(BTreeMap::from([("team".into(), "a".into())]));
        assert!(d.is_satisfied_by(&live));
        live.data.as_mut().unwrap().insert("extra".into(), "x".into());
        assert!(!d.is_satisfied_by(&live));
        let fixed = d.corrected(&live);
        assert!(d.is_satisfied_by(&fixed));
        assert_eq!(fixed.metadata.labels, live.metadata.labels);
        assert_eq!(fixed.metadata.resource_version.as_deref(), Some("7"));
    }
}

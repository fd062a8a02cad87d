//! The Kubernetes version this build targets, and the course's version rule:
//! a client built for 1.X talks to a 1.X cluster; one minor apart is allowed
//! (with a warning), more is not.

use std::fmt;

/// Kubernetes major version k8s-openapi was compiled for (see `build.rs`).
pub const TARGET_MAJOR: &str = env!("K8S_TARGET_MAJOR");
/// Kubernetes minor version k8s-openapi was compiled for (see `build.rs`).
pub const TARGET_MINOR: &str = env!("K8S_TARGET_MINOR");

/// What `--version` prints: the crate and the Kubernetes version it targets.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (built for Kubernetes ",
    env!("K8S_TARGET_MAJOR"),
    ".",
    env!("K8S_TARGET_MINOR"),
    ")"
);

/// The targeted minor as a number.
pub fn target_minor() -> u32 {
    TARGET_MINOR.parse().expect("build.rs writes a number")
}

/// `"1.36"`.
pub fn target() -> String {
    format!("{TARGET_MAJOR}.{TARGET_MINOR}")
}

/// Reads a minor version as the API server reports it (`"36"`, or `"36+"` on
/// some distributions).
pub fn parse_minor(minor: &str) -> Option<u32> {
    minor.trim_end_matches('+').parse().ok()
}

/// How far a server is from the version this build targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skew {
    Same,
    /// One minor apart: allowed, with a warning.
    OneApart {
        client: u32,
        server: u32,
    },
    /// Further apart: not supported.
    TooFar {
        client: u32,
        server: u32,
    },
}

impl Skew {
    pub fn between(client: u32, server: u32) -> Self {
        match client.abs_diff(server) {
            0 => Skew::Same,
            1 => Skew::OneApart { client, server },
            _ => Skew::TooFar { client, server },
        }
    }

    pub fn is_supported(&self) -> bool {
        !matches!(self, Skew::TooFar { .. })
    }
}

impl fmt::Display for Skew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skew::Same => write!(f, "client and server on the same minor"),
            Skew::OneApart { client, server } => write!(
                f,
                "client built for 1.{client}, server is 1.{server}: one minor apart is allowed"
            ),
            Skew::TooFar { client, server } => write!(
                f,
                "client built for 1.{client}, server is 1.{server}: more than one minor apart; \
                 use a 1.{client} cluster, or rebuild with k8s-openapi's v1_{server} feature"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_comes_from_k8s_openapi() {
        assert_eq!(TARGET_MAJOR, "1");
        // The same minor that k8s-openapi's own conditional macros report.
        #[allow(unused_assignments)]
        let mut macro_minor = 0;
        k8s_openapi::k8s_if_1_33! { macro_minor = 33; }
        k8s_openapi::k8s_if_1_34! { macro_minor = 34; }
        k8s_openapi::k8s_if_1_35! { macro_minor = 35; }
        k8s_openapi::k8s_if_1_36! { macro_minor = 36; }
        k8s_openapi::k8s_if_1_37! { macro_minor = 37; }
        assert_eq!(target_minor(), macro_minor);
        assert!(LONG_VERSION.contains(&format!("Kubernetes {}", target())));
    }

    #[test]
    fn skew_rule() {
        assert_eq!(Skew::between(36, 36), Skew::Same);
        assert!(Skew::between(36, 35).is_supported());
        assert!(Skew::between(36, 37).is_supported());
        let far = Skew::between(36, 33);
        assert!(!far.is_supported());
        let msg = far.to_string();
        assert!(msg.contains("1.36") && msg.contains("1.33") && msg.contains("v1_33"), "{msg}");
    }

    #[test]
    fn minors_with_a_plus() {
        assert_eq!(parse_minor("36"), Some(36));
        assert_eq!(parse_minor("36+"), Some(36));
        assert_eq!(parse_minor("x"), None);
    }
}

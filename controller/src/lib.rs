//! A kube-rs controller that keeps one ConfigMap (by default `default/my-config`)
//! at its desired data: the client-go course's stage 1, step 4.
//!
//! | module        | holds                                                        |
//! |---------------|--------------------------------------------------------------|
//! | [`desired`]   | the desired ConfigMap, its defaults and validation           |
//! | [`reconcile`] | one reconcile: cache read → compare → create/update/nothing  |
//! | [`runner`]    | informer → keys → queue → workers; failure policy; shutdown  |
//! | [`shutdown`]  | what a shutdown waits for within its grace, and what it cut off |
//! | [`pace`]      | the pace of corrections beside a second writer               |
//! | [`http`]      | `/healthz`, `/readyz`, `/metrics`                            |
//! | [`metrics`]   | the Prometheus metrics                                       |
//! | [`events`]    | Kubernetes Events: kube's Recorder, off the reconcile path   |
//! | [`version`]   | the Kubernetes version built for, and the skew rule          |
//! | [`template`]  | the stage-2 custom resource, ConfigMapTemplate, and its CRD  |
//! | [`cli`], [`connect`], [`telemetry`] | flags, kubeconfig, logs                |

pub mod cli;
pub mod connect;
pub mod desired;
pub mod events;
#[cfg(test)]
mod fixtures;
pub mod http;
pub mod metrics;
pub mod pace;
pub mod reconcile;
pub mod runner;
pub mod shutdown;
pub mod telemetry;
pub mod template;
pub mod version;

//! What the cluster says of its own cost: the API server's `/metrics`
//! (request latency as a histogram, its resident memory) and the kubelets'
//! `/stats/summary` (each controller pod's working set), read as the
//! instructor.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::config::Kubeconfig;
use serde::Serialize;

/// A client of `kubeconfig`, as `context` (or its current one): the kit's one client stack.
pub async fn client(kubeconfig: &Path, context: Option<&str>) -> Result<kube::Client> {
    let mut file = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("cannot read {}", kubeconfig.display()))?;
    file.current_context = context.map(String::from).or(file.current_context);
    labkit::lab::client_of(file, |_| ()).await
}

/// Verbs whose duration is how long a stream stayed open, not a request's.
const STREAMS: [&str; 2] = ["WATCH", "CONNECT"];

/// One read of the API server's `/metrics`: its requests' duration
/// histogram (streams left out), cumulative by upper bound, and its memory.
#[derive(Clone, Debug, Default)]
pub struct ApiScrape {
    buckets: BTreeMap<u64, f64>,
    memory: f64,
}

/// The API server over a stretch of time.
#[derive(Debug, Default, Serialize)]
pub struct ApiFigures {
    pub requests: u64,
    /// The upper bound (seconds) of the histogram bucket that holds the 99th percentile.
    pub p99_at_most: f64,
    /// Its resident memory at the end, in MiB.
    pub memory_mib: f64,
}

pub async fn api_server(client: &kube::Client) -> Result<ApiScrape> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await.context("the API server's /metrics")?;
    Ok(ApiScrape::parse(&text))
}

impl ApiScrape {
    fn parse(text: &str) -> ApiScrape {
        let mut scrape = ApiScrape::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else { continue };
            let value: f64 = value.parse().unwrap_or(0.0);
            if series.starts_with("process_resident_memory_bytes") {
                scrape.memory = value;
            }
            let bucket = series.strip_prefix("apiserver_request_duration_seconds_bucket{");
            let Some(labels) = bucket.and_then(|b| b.strip_suffix('}')) else { continue };
            let label = |key: &str| {
                labels
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix("=\"")?.strip_suffix('"'))
            };
            if STREAMS.contains(&label("verb").unwrap_or_default()) {
                continue;
            }
            let le = label("le").and_then(|le| le.parse::<f64>().ok()).unwrap_or(f64::INFINITY);
            // Keyed by microseconds: the bounds are a fixed set, and f64 is not Ord.
            *scrape.buckets.entry((le * 1e6).min(u64::MAX as f64) as u64).or_default() += value;
        }
        scrape
    }

    /// The requests since `before`: how many, and the bucket of their p99.
    pub fn since(&self, before: &ApiScrape) -> ApiFigures {
        let counts: Vec<(u64, f64)> = self
            .buckets
            .iter()
            .map(|(le, n)| (*le, n - before.buckets.get(le).copied().unwrap_or(0.0)))
            .collect();
        let total = counts.last().map_or(0.0, |(_, n)| *n);
        let p99 = counts.iter().find(|(_, n)| *n >= 0.99 * total).map_or(0, |(le, _)| *le);
        ApiFigures {
            requests: total as u64,
            p99_at_most: p99 as f64 / 1e6,
            memory_mib: self.memory / (1 << 20) as f64,
        }
    }
}

/// The controllers' pods (namespaces `<prefix>-…`): how many, and their
/// working sets' sum in MiB, from every node's kubelet.
#[derive(Debug, Default, Serialize)]
pub struct ControllersMemory {
    pub pods: usize,
    pub total_mib: f64,
}

pub async fn controllers_memory(client: &kube::Client, prefix: &str) -> Result<ControllersMemory> {
    let mut memory = ControllersMemory::default();
    for node in Api::<Node>::all(client.clone()).list(&ListParams::default()).await? {
        let name = node.metadata.name.unwrap_or_default();
        let path = format!("/api/v1/nodes/{name}/proxy/stats/summary");
        let summary: serde_json::Value =
            client.request(http::Request::get(&path).body(Vec::new())?).await?;
        for pod in summary["pods"].as_array().into_iter().flatten() {
            let namespace = pod["podRef"]["namespace"].as_str().unwrap_or_default();
            let controller =
                pod["podRef"]["name"].as_str().unwrap_or_default().starts_with("my-controller");
            if namespace.starts_with(&format!("{prefix}-")) && controller {
                memory.pods += 1;
                memory.total_mib += working_set(pod) / (1 << 20) as f64;
            }
        }
    }
    Ok(memory)
}

/// A pod's working set in bytes: its containers' sum. The pod's own figure
/// reads 0 where the kubelet sees no pod-level cgroup stats (kind's nodes on a
/// cgroup v1 host), so the larger of the two.
fn working_set(pod: &serde_json::Value) -> f64 {
    let bytes = |v: &serde_json::Value| v["memory"]["workingSetBytes"].as_f64();
    let containers = pod["containers"].as_array().into_iter().flatten().filter_map(bytes).sum();
    bytes(pod).unwrap_or(0.0).max(containers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_sums_each_bound_over_the_series_but_streams() {
        let text = "# HELP x\n\
            apiserver_request_duration_seconds_bucket{resource=\"\",verb=\"GET\",le=\"0.005\"} 33\n\
            apiserver_request_duration_seconds_bucket{resource=\"\",verb=\"GET\",le=\"+Inf\"} 35\n\
            apiserver_request_duration_seconds_bucket{resource=\"pods\",verb=\"LIST\",le=\"0.005\"} 1\n\
            apiserver_request_duration_seconds_bucket{resource=\"pods\",verb=\"WATCH\",le=\"0.005\"} 9\n\
            process_resident_memory_bytes 2.75693568e+08\n";
        let scrape = ApiScrape::parse(text);
        assert_eq!(scrape.buckets, [(5_000, 34.0), (u64::MAX, 35.0)].into_iter().collect());
        assert_eq!(scrape.memory, 275_693_568.0);
    }

    #[test]
    fn the_p99_is_the_bound_of_the_bucket_that_holds_it_since_before() {
        let scrape = |pairs: &[(u64, f64)]| ApiScrape {
            buckets: pairs.iter().copied().collect(),
            memory: 0.0,
        };
        let before = scrape(&[(5_000, 10.0), (100_000, 10.0), (u64::MAX, 10.0)]);
        let after = scrape(&[(5_000, 990.0), (100_000, 1009.0), (u64::MAX, 1010.0)]);
        let figures = after.since(&before);
        assert_eq!(figures.requests, 1000);
        assert_eq!(figures.p99_at_most, 0.1);
    }
}

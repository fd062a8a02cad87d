//! etcd's v3 API through its JSON gateway (TLS with the admin's certificate,
//! [`labkit::lab::etcd_client`]): just what the compaction fault needs — read the revision, write a scratch key, compact,
//! read at an old revision. `etcdctl` is not built here, and a gRPC client would be a large
//! dependency for four calls.

use anyhow::Context as _;
use base64::{Engine as _, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

use labkit::tr;

/// The lab's etcd.
pub struct Etcd {
    client: kube::Client,
}

impl Etcd {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    /// The store's current revision. Every write anywhere moves it, and a
    /// Kubernetes resourceVersion is such a revision.
    pub async fn revision(&self) -> anyhow::Result<u64> {
        // A range over one key that does not exist: only the header matters.
        let answer = self.call("/v3/kv/range", json!({"key": key(b"\0")})).await?;
        header_revision(&answer)
    }

    /// Writes `value` at `key`; the revision after the write.
    pub async fn put(&self, name: &str, value: &str) -> anyhow::Result<u64> {
        let body = json!({"key": key(name.as_bytes()), "value": STANDARD.encode(value)});
        header_revision(&self.call("/v3/kv/put", body).await?)
    }

    /// Deletes `key`; the revision after the delete.
    pub async fn delete(&self, name: &str) -> anyhow::Result<u64> {
        let body = json!({"key": key(name.as_bytes())});
        header_revision(&self.call("/v3/kv/deleterange", body).await?)
    }

    /// Discards the history before `revision` (physically: the call returns
    /// once the old revisions are gone from the backend).
    pub async fn compact(&self, revision: u64) -> anyhow::Result<()> {
        let body = json!({"revision": revision.to_string(), "physical": true});
        self.call("/v3/kv/compaction", body).await?;
        Ok(())
    }

    /// Reads the store as of `revision`: `Err` with etcd's own words when it
    /// cannot ("mvcc: required revision has been compacted").
    pub async fn read_at(&self, revision: u64) -> anyhow::Result<()> {
        let body = json!({"key": key(b"\0"), "revision": revision.to_string()});
        self.call("/v3/kv/range", body).await.map(drop)
    }

    /// etcd's answer, or its own words when it refuses (kube's error carries the body).
    async fn call(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let request = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&body)?)?;
        let answer = self.client.request_text(request).await;
        let answer = answer.with_context(|| tr!("etcd {path}", path))?;
        serde_json::from_str(&answer)
            .with_context(|| tr!("etcd {path}: not JSON: {answer}", path, answer))
    }
}

/// Keys travel base64-encoded in the JSON gateway.
fn key(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// `header.revision`, an int64 the gateway writes as a JSON string.
fn header_revision(answer: &Value) -> anyhow::Result<u64> {
    answer["header"]["revision"]
        .as_str()
        .and_then(|r| r.parse().ok())
        .with_context(|| tr!("no header.revision in {answer}", answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_gateways_revision() {
        let answer: Value = serde_json::from_str(
            r#"{"header":{"cluster_id":"1","member_id":"2","revision":"252","raft_term":"2"}}"#,
        )
        .unwrap();
        assert_eq!(header_revision(&answer).unwrap(), 252);
        assert!(header_revision(&json!({})).is_err());
        assert_eq!(key(b"\0"), "AA==");
    }
}

//! One request to a plain-HTTP endpoint on loopback (etcd's `/health` and its v3 JSON
//! gateway, the controller's `/readyz` and `/metrics`), through hyper-util's client: kube's
//! own HTTP stack, already in the build.

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context, Result};
use http::{Method, Request, header::CONTENT_TYPE};
use http_body_util::{BodyExt, Full};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};

use crate::tr;

/// What came back: the status code and the body, for showing to a person.
pub struct Reply {
    pub status: u16,
    pub body: String,
}

/// GET `path` from a base URL such as `http://127.0.0.1:8080` (what lab.json records).
pub async fn get_url(base: &str, path: &str, timeout: Duration) -> Result<Reply> {
    let authority = base
        .strip_prefix("http://")
        .with_context(|| tr!("{base} is not an http:// URL", base = format!("{base:?}")))?
        .trim_end_matches('/');
    let addr: SocketAddr = authority.parse().with_context(|| {
        tr!("{base} does not name an IP address and port", base = format!("{base:?}"))
    })?;
    exchange(Method::GET, addr, path, Vec::new(), timeout).await
}

/// POST `body` as JSON to `path` on `addr` (etcd's v3 gateway: `/v3/kv/range`, …), giving up
/// after `timeout` in total.
pub async fn post_json(
    addr: SocketAddr,
    path: &str,
    body: &serde_json::Value,
    timeout: Duration,
) -> Result<Reply> {
    exchange(Method::POST, addr, path, serde_json::to_vec(body)?, timeout).await
}

async fn exchange(
    method: Method,
    addr: SocketAddr,
    path: &str,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Reply> {
    let url = format!("http://{addr}{path}");
    let request = Request::builder()
        .method(method)
        .uri(&url)
        .header(CONTENT_TYPE, "application/json")
        .body(Full::<bytes::Bytes>::from(body))?;
    let answer = async {
        let client = Client::builder(TokioExecutor::new()).build_http();
        let response =
            client.request(request).await.with_context(|| tr!("cannot reach {url}", url))?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Reply { status, body: String::from_utf8_lossy(&body).trim().to_string() })
    };
    tokio::time::timeout(timeout, answer).await.with_context(|| {
        tr!("no answer from {url} within {timeout}", url, timeout = format!("{timeout:?}"))
    })?
}

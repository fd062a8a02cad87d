//! One GET of a plain-HTTP endpoint on loopback (the controller's `/readyz` and
//! `/metrics`), through hyper-util's client: kube's own HTTP stack, already in the build.

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context, Result};
use http::Request;
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
    let url = format!("http://{addr}{path}");
    let request = Request::get(&url).body(Full::<bytes::Bytes>::default())?;
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

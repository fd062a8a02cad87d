//! A minimal HTTP/1.1 client for plain-HTTP endpoints on loopback (etcd's `/health` and its
//! v3 JSON gateway, the controller's `/readyz`): one request, `Connection: close`, no TLS, no
//! redirects. A full HTTP client crate would add more to the build than these few lines.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What came back: the status code and the body (chunked encoding is not decoded; the
/// body is for showing to a person).
pub struct Reply {
    pub status: u16,
    pub body: String,
}

/// GET `path` from a base URL such as `http://127.0.0.1:8080` (what lab.json records).
pub async fn get_url(base: &str, path: &str, timeout: Duration) -> Result<Reply> {
    let authority = base
        .strip_prefix("http://")
        .with_context(|| format!("{base:?} is not an http:// URL"))?
        .trim_end_matches('/');
    let addr: SocketAddr = authority
        .parse()
        .with_context(|| format!("{base:?} does not name an IP address and port"))?;
    get(addr, path, timeout).await
}

/// GET `path` from `addr`, giving up after `timeout` in total.
pub async fn get(addr: SocketAddr, path: &str, timeout: Duration) -> Result<Reply> {
    within(timeout, addr, path, exchange(addr, "GET", path, None)).await
}

/// POST `body` as JSON to `path` on `addr` (etcd's v3 gateway: `/v3/kv/range`, …), giving up
/// after `timeout` in total.
pub async fn post_json(
    addr: SocketAddr,
    path: &str,
    body: &serde_json::Value,
    timeout: Duration,
) -> Result<Reply> {
    let body = serde_json::to_vec(body)?;
    within(timeout, addr, path, exchange(addr, "POST", path, Some(&body))).await
}

async fn within(
    timeout: Duration,
    addr: SocketAddr,
    path: &str,
    exchange: impl Future<Output = Result<Reply>>,
) -> Result<Reply> {
    tokio::time::timeout(timeout, exchange)
        .await
        .with_context(|| format!("no answer from http://{addr}{path} within {timeout:?}"))?
}

async fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> Result<Reply> {
    let mut stream =
        TcpStream::connect(addr).await.with_context(|| format!("cannot connect to {addr}"))?;
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n").into_bytes();
    if let Some(body) = body {
        let headers =
            format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len());
        request.extend_from_slice(headers.as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    request.extend_from_slice(body.unwrap_or_default());
    stream.write_all(&request).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status_line = head.lines().next().unwrap_or_default();
    let Some(status) =
        status_line.split_whitespace().nth(1).and_then(|code| code.parse::<u16>().ok())
    else {
        bail!("not an HTTP answer from {addr}: {status_line:?}");
    };
    Ok(Reply { status, body: body.trim().to_string() })
}

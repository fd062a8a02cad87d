//! Headless Chromium through Debian's `chromedriver`, as W3C WebDriver asks: a session,
//! a page, a script that reads what a person would see, a screenshot. Written here rather
//! than taken from fantoccini or thirtyfour: five requests, where either crate brings 45
//! crates and ten second versions (http 0.2, thiserror 1, ICU) that deny.toml refuses.

use std::path::Path;
use std::process::Child;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use base64::Engine as _;
use http_body_util::{BodyExt as _, Full};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use labkit::command::Cmd;
use labkit::eventually::{Check, eventually};
use serde_json::{Value, json};

/// A browser session: its driver, and the Chromium it started, killed when dropped.
pub struct Browser {
    driver: Child,
    url: String,
}

impl Browser {
    /// Chromium, headless, asking for pages in `language` (`en`, `zh-CN`): a new driver on a free port.
    pub async fn start(language: &str) -> Result<Browser> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        // Its own process group (`spawn_to_log`): Chromium's processes end with the driver's.
        let log = labkit::project::target_dir().join(format!("chromedriver-{port}.log"));
        let driver = Cmd::argv(["chromedriver".to_string(), format!("--port={port}")])
            .spawn_to_log(&log)
            .context("chromedriver (Debian's chromium-driver) does not start")?;
        let mut browser = Browser { driver, url: format!("http://127.0.0.1:{port}") };
        let options = json!({
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,700", format!("--lang={language}")],
            "prefs": {"intl.accept_languages": language},
        });
        let capabilities =
            json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": options}}});
        let session = eventually("chromedriver to answer", Duration::from_secs(20), || {
            let (url, body) = (format!("{}/session", browser.url), capabilities.clone());
            async move { Ok(Check::Done(send("POST", &url, Some(body)).await?)) }
        })
        .await?;
        let id = session["sessionId"].as_str().context("a session id")?;
        browser.url = format!("{}/session/{id}", browser.url);
        Ok(browser)
    }

    pub async fn open(&self, url: &str) -> Result<()> {
        send("POST", &format!("{}/url", self.url), Some(json!({"url": url}))).await.map(drop)
    }

    /// What `script` (a function body) returns in the page.
    pub async fn eval(&self, script: &str) -> Result<Value> {
        let body = json!({"script": script, "args": []});
        send("POST", &format!("{}/execute/sync", self.url), Some(body)).await
    }

    /// Waits until `script` returns true; on timeout, says what `shown` returned last.
    pub async fn until(&self, what: &str, script: &str, shown: &str) -> Result<()> {
        eventually(what, Duration::from_secs(60), || async move {
            let done = self.eval(script).await? == Value::Bool(true);
            Ok(Check::done_if(done, (), self.eval(shown).await?.to_string()))
        })
        .await
    }

    pub async fn screenshot(&self, path: &Path) -> Result<()> {
        let png = send("GET", &format!("{}/screenshot", self.url), None).await?;
        let png =
            base64::engine::general_purpose::STANDARD.decode(png.as_str().unwrap_or_default())?;
        std::fs::write(path, png).with_context(|| format!("cannot write {}", path.display()))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // SAFETY: killpg(2) of the driver's own process group; no memory is involved.
        unsafe { libc::killpg(self.driver.id() as libc::pid_t, libc::SIGKILL) };
        let _ = self.driver.wait();
    }
}

/// One WebDriver request; its `value`, or the error the driver answered.
async fn send(method: &str, url: &str, body: Option<Value>) -> Result<Value> {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = http::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::<bytes::Bytes>::from(body))?;
    let client = Client::builder(TokioExecutor::new()).build_http();
    let response = client.request(request).await.with_context(|| format!("{method} {url}"))?;
    let status = response.status();
    let answer: Value = serde_json::from_slice(&response.into_body().collect().await?.to_bytes())?;
    if !status.is_success() {
        bail!("{method} {url}: {status} {}", answer["value"]);
    }
    Ok(answer["value"].clone())
}

//! `cargo xtask room serve`: the room's live page. One process beside `room up`: the
//! informers of [`super::view`], a page (`xtask/room/page.html`, nothing fetched from
//! elsewhere), its server-sent events, and an attendee's detail (Events and the controller's
//! log lines, through the API server) when the instructor clicks a row. Read-only: actions
//! stay commands.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use anyhow::{Context as _, Result};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as Sent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::Stream;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, LogParams};
use labkit::tr;
use serde_json::json;

use super::view::View;
use super::{RoomFile, RoomOptions};
use crate::locale::{self, Lang};

/// What every request is answered from.
#[derive(Clone)]
struct Page {
    view: View,
    client: kube::Client,
    room: Arc<RoomFile>,
    /// Asked for in every request's `token=` when the page listens beyond loopback.
    secret: Option<String>,
}

/// How many of an attendee's Events, and of their controller's log lines, the detail shows.
const DETAIL_EVENTS: usize = 20;
const DETAIL_LOG_LINES: i64 = 50;

pub async fn run(options: &RoomOptions, listen: SocketAddr) -> Result<ExitCode> {
    let Some((room, client)) = super::open(options).await? else {
        anyhow::bail!("{}: `cargo xtask room up` first", super::not_up(&options.name));
    };
    // As Jupyter does: beyond this machine, the page asks for what only its URL carries.
    let secret = (!listen.ip().is_loopback()).then(labkit::record::random_hex::<16>).transpose()?;
    let (view, informers) = View::new(&client, &room.namespaces);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| tr!("cannot listen on {listen}: another --listen"))?;
    let token = secret.as_ref().map(|s| format!("?token={s}")).unwrap_or_default();
    let url = format!("http://{}/{token}", listener.local_addr()?);
    println!(
        "{}",
        tr!("room {name}: its page is at {url} (Ctrl-C ends it)", name = room.name, url)
    );
    let page = Page { view: view.clone(), client: client.clone(), room: Arc::new(room), secret };
    let app = axum::Router::new()
        .route("/", get(html))
        .route("/events", get(events))
        .route("/attendee/{namespace}", get(detail))
        .layer(middleware::from_fn_with_state(page.clone(), guard))
        .with_state(page.clone());
    let hangup = super::room_dir(&options.name).join("hangup.log");
    let mut signals = crate::interrupt::Interrupts::catch(&hangup)?;
    tokio::select! {
        served = axum::serve(listener, app) => served?,
        () = informers => {}
        () = signals.first("room serve") => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// Every request: with the secret, when there is one; on loopback, named as this machine (a
/// site the browser has open cannot rebind its own name to 127.0.0.1 and read the room).
async fn guard(State(page): State<Page>, request: Request, next: Next) -> Response {
    let query = request.uri().query().unwrap_or_default();
    let given = query.split('&').find_map(|pair| pair.strip_prefix("token="));
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok());
    let host = host.unwrap_or_default().rsplit_once(':').map_or("", |(name, _)| name);
    let refused = match &page.secret {
        Some(secret) => given != Some(secret.as_str()),
        None => !["localhost", "127.0.0.1", "[::1]"].contains(&host),
    };
    if refused {
        let said = tr!("this page needs the token= that `room serve` printed at its start");
        return (StatusCode::FORBIDDEN, said).into_response();
    }
    next.run(request).await
}

/// The page, in the browser's first language of the two it has.
async fn html(headers: HeaderMap) -> Response {
    let wanted = headers.get(header::ACCEPT_LANGUAGE).and_then(|v| v.to_str().ok());
    let zh = wanted.unwrap_or_default().trim_start().starts_with("zh");
    let lang = if zh { Lang::Zh } else { Lang::En };
    let body =
        include_str!("../../room/page.html").replace("/*TEXTS*/{}", &texts_of(lang).to_string());
    // Nothing but this page's own script and style, and requests to this server.
    let policy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'";
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CONTENT_SECURITY_POLICY, policy),
    ];
    (headers, body).into_response()
}

/// What the page says in `lang`: its words, and each grade row's title (the `[rows]` of the
/// grade's own texts, `xtask/grade/`).
fn texts_of(lang: Lang) -> serde_json::Value {
    let grade = [include_str!("../../grade/en.toml"), include_str!("../../grade/zh-CN.toml")];
    let rows = grade[lang as usize].parse::<toml::Table>().ok().and_then(|mut t| t.remove("rows"));
    json!({"page": texts(lang), "rows": rows, "lang": lang})
}

/// The page's words in `lang` (`xtask/room/<lang>.toml`).
fn texts(lang: Lang) -> &'static BTreeMap<String, String> {
    static TEXTS: [OnceLock<BTreeMap<String, String>>; 2] = [OnceLock::new(), OnceLock::new()];
    let files = [include_str!("../../room/en.toml"), include_str!("../../room/zh-CN.toml")];
    locale::table(lang, &TEXTS, files, "room")
}

/// The room whole, at once and then on every change the informers see.
async fn events(State(page): State<Page>) -> Sse<impl Stream<Item = Result<Sent, Infallible>>> {
    let mut changed = page.view.changed.subscribe();
    changed.mark_changed();
    let stream = futures::stream::unfold((changed, page), |(mut changed, page)| async move {
        changed.changed().await.ok()?;
        let room = json!({"room": page.room.name, "expires": page.room.expires, "seats": page.view.seats()});
        Some((Ok(Sent::default().data(room.to_string())), (changed, page)))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// An attendee's Events, newest last, and their controller's last log lines.
async fn detail(State(page): State<Page>, Path(namespace): Path<String>) -> Response {
    if !page.room.namespaces.contains(&namespace) {
        return (StatusCode::NOT_FOUND, tr!("not an attendee of this room")).into_response();
    }
    let answer = async {
        let mut events = Api::<Event>::namespaced(page.client.clone(), &namespace)
            .list(&ListParams::default())
            .await?
            .items;
        events.sort_by_key(super::view::happened);
        let events = &events[events.len().saturating_sub(DETAIL_EVENTS)..];
        let host = labkit::deployment::DeploymentHost::new(page.client.clone(), &namespace);
        let log = match host.newest_pod().await? {
            Some(pod) => {
                let tail = LogParams { tail_lines: Some(DETAIL_LOG_LINES), ..LogParams::default() };
                host.pods()
                    .logs(&kube::ResourceExt::name_any(&pod), &tail)
                    .await
                    .unwrap_or_else(|e| e.to_string())
            }
            None => String::new(),
        };
        anyhow::Ok(json!({"events": events, "log": log}))
    };
    let body = answer.await.unwrap_or_else(|e| json!({"error": format!("{e:#}")}));
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_every_text_in_both_languages_and_its_template_slot() {
        let (en, zh) = (texts(Lang::En), texts(Lang::Zh));
        assert_eq!(en.keys().collect::<Vec<_>>(), zh.keys().collect::<Vec<_>>());
        for (key, text) in en {
            assert_eq!(locale::placeholders(text), locale::placeholders(&zh[key]), "{key}");
        }
        let page = include_str!("../../room/page.html");
        assert_eq!(page.matches("/*TEXTS*/{}").count(), 1);
        for lang in [Lang::En, Lang::Zh] {
            let rows = texts_of(lang)["rows"].as_object().cloned().unwrap_or_default();
            assert!(rows.contains_key("starts") && rows.len() > 5, "{lang:?}: {rows:?}");
        }
        // Every key the page asks for (`t("…")`) is in the tables.
        for (at, _) in page.match_indices("t(\"") {
            if page[..at].ends_with(|c: char| c.is_alphanumeric()) {
                continue;
            }
            let asked = page[at + 3..].split('"').next().unwrap_or_default();
            // `t("col_" + key)`: a prefix of keys.
            let prefix = !page[at + 4 + asked.len()..].starts_with(')');
            let found = en.keys().any(|k| k == asked || (prefix && k.starts_with(asked)));
            assert!(found, "page.html asks for {asked:?}");
        }
    }

    #[test]
    fn nothing_an_attendee_writes_reaches_the_page_as_markup() {
        let page = include_str!("../../room/page.html");
        for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"] {
            assert!(!page.contains(sink), "page.html uses {sink}: text goes in as textContent");
        }
    }
}

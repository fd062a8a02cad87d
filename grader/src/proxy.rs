//! A reverse proxy on loopback between the graded program and the API
//! server: the program's kubeconfig ([`kubeconfig_in`], readable by its user
//! alone) names `http://127.0.0.1:PORT/SECRET` and holds no credentials
//! (client-go sends none over plain HTTP); the proxy answers only a request
//! under that path with that Host — anyone else on the machine gets 403 —
//! and adds the program's token to it, so the API server still sees the
//! program itself ([`super::identity`]); and it counts each request by kind
//! ([`Counts`]): every one the program makes passes here.
//! Requests and responses pass unchanged, watches streaming, except where a
//! row asks for one of two things a real cluster does to every controller
//! sooner or later, made to happen now:
//!
//! - **A conflict** ([`Proxy::arm_conflict`]): the program's next update of
//!   my-config (PUT or PATCH) is held while another field manager writes
//!   my-config (an annotation), then passed on: when the update carries the
//!   resourceVersion it read, the API server answers 409 Conflict.
//! - **A relist** ([`Proxy::relist`]): the program's watches of ConfigMaps
//!   are ended, and each watch it resumes is answered as an API server
//!   answers a watch from a compacted resourceVersion — 410 Gone, "too old
//!   resource version" — so its informer lists again.
//!
//! Nothing of it is in the cluster: it dies with the grade.

mod request;

use std::{
    convert::Infallible,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
};

use bytes::Bytes;
use http::{HeaderName, Request, Response, StatusCode, Uri, header};
use http_body_util::{BodyExt as _, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{Patch, PatchParams},
    config::Kubeconfig,
};

use crate::identity::Identity;
use serde_json::json;
use tokio::sync::{oneshot, watch};

use labkit::tr;
pub use request::{Counts, Target};
use request::{Kind, can_i, classify, query_value};

/// The program's kubeconfig, in the borrow's folder `dir` (removed whole when the lab is put back).
pub fn kubeconfig_in(dir: &Path) -> PathBuf {
    dir.join("grade-program.kubeconfig")
}

/// The other writer's field manager, and the annotation it writes.
pub const RIVAL_MANAGER: &str = "lab-kit-grade-rival";
pub const RIVAL_ANNOTATION: &str = "lab-kit.grade/rival";

type Body = UnsyncBoxBody<Bytes, BoxError>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How the program's update went when another writer wrote first.
#[derive(Clone, Debug)]
pub struct Contested {
    /// PUT or PATCH.
    pub method: String,
    /// What the API server answered the program: 409 when it carried the
    /// resourceVersion it had read.
    pub status: u16,
}

/// The running proxy; dropped, it stops (and with it every stream it passes).
pub struct Proxy {
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
    /// The program's kubeconfig: the proxy's address, the program's token.
    pub kubeconfig: PathBuf,
}

struct Shared {
    /// The client to the API server, as the program: the identity's
    /// kubeconfig (its cluster, its CA, its token).
    upstream: kube::Client,
    target: Target,
    /// The admin's ConfigMaps: the other writer.
    api: Api<ConfigMap>,
    /// Armed: told how the next update of the target went.
    conflict: Mutex<Option<oneshot::Sender<Result<Contested, String>>>>,
    rival_writes: AtomicU64,
    /// Bumped to end every open watch; each holds a receiver while it is open.
    cut: watch::Sender<u64>,
    /// Resumed watches still to be answered 410 Gone.
    gone_owed: AtomicUsize,
    counts: Mutex<Counts>,
    /// What the API server answered 403 Forbidden, each as `kubectl auth can-i` asks it.
    denied: Mutex<Vec<String>>,
    /// How many updates of the target it answered 409 Conflict.
    conflicts: AtomicU64,
}

impl Proxy {
    /// Listens on loopback, passing requests to the API server of the
    /// identity's kubeconfig (its cluster, its CA) with its token, and writes
    /// the program's kubeconfig into `dir`: the identity's with the proxy's
    /// `http://` address, no CA and no token. `admin` is the other writer.
    pub async fn start(
        identity: &Identity,
        dir: &Path,
        target: Target,
        admin: kube::Client,
    ) -> anyhow::Result<Proxy> {
        let kubeconfig = identity.kubeconfig.clone();
        // The kit's one client stack; the program sees every answer as the
        // API server gave it: no retry of a 429 here.
        let no_retry = |config: &mut kube::Config| config.default_retry = false;
        let upstream = labkit::lab::client_of(kubeconfig.clone(), no_retry).await?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            api: Api::namespaced(admin, &target.namespace),
            target,
            conflict: Mutex::new(None),
            rival_writes: AtomicU64::new(0),
            cut: watch::Sender::new(0),
            gone_owed: AtomicUsize::new(0),
            counts: Mutex::new(Counts::default()),
            denied: Mutex::new(Vec::new()),
            conflicts: AtomicU64::new(0),
        });
        let secret = labkit::record::random_hex::<16>()?;
        let served = Served { host: addr.to_string(), prefix: format!("/{secret}") };
        let server = tokio::spawn(serve(listener, shared.clone(), served));
        let path = kubeconfig_in(dir);
        labkit::files::create_dir(dir)?;
        let text = serde_saphyr::to_string(&through(kubeconfig, addr, &secret))?;
        labkit::files::write_private(&path, text)?;
        Ok(Proxy { shared, server, kubeconfig: path })
    }

    /// The program's next update of the target is contested (see the
    /// module's doc); the receiver tells how it went.
    pub fn arm_conflict(&self) -> oneshot::Receiver<Result<Contested, String>> {
        let (tell, told) = oneshot::channel();
        *self.shared.conflict.lock().expect("not poisoned") = Some(tell);
        told
    }

    /// The next update is passed on as it is again.
    pub fn disarm(&self) {
        self.shared.conflict.lock().expect("not poisoned").take();
    }

    /// Ends the program's open watches of ConfigMaps and answers the watch
    /// each resumes with 410 Gone; returns how many were open.
    pub fn relist(&self) -> usize {
        let open = self.open_watches();
        self.shared.gone_owed.store(open, Ordering::SeqCst);
        self.shared.cut.send_modify(|n| *n += 1);
        open
    }

    /// The program's requests so far, by kind.
    pub fn counts(&self) -> Counts {
        *self.shared.counts.lock().expect("not poisoned")
    }

    /// Its requests answered 403 Forbidden so far, in order (`kubectl auth can-i` words).
    pub fn denied(&self) -> Vec<String> {
        self.shared.denied.lock().expect("not poisoned").clone()
    }

    /// How many watches of ConfigMaps it holds open now.
    pub fn open_watches(&self) -> usize {
        self.shared.cut.receiver_count()
    }

    /// How many of its updates of the target were answered 409 Conflict so far.
    pub fn conflicts(&self) -> u64 {
        self.shared.conflicts.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// `kubeconfig` with every cluster at the proxy's address and secret path, over
/// plain HTTP on loopback: no CA, no server name; and no user's token (the proxy adds it).
fn through(mut kubeconfig: Kubeconfig, addr: SocketAddr, secret: &str) -> Kubeconfig {
    for user in kubeconfig.auth_infos.iter_mut().filter_map(|u| u.auth_info.as_mut()) {
        user.token = None;
    }
    for cluster in kubeconfig.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
        cluster.server = Some(format!("http://{addr}/{secret}"));
        cluster.certificate_authority = None;
        cluster.certificate_authority_data = None;
        cluster.tls_server_name = None;
        cluster.insecure_skip_tls_verify = None;
    }
    kubeconfig
}

/// What a request must carry to be the program's: the Host of the proxy's
/// address (a web page's request names its own), its path under the secret.
#[derive(Clone)]
struct Served {
    host: String,
    prefix: String,
}

impl Served {
    /// The request's URI without the secret, when it is the program's.
    fn admit<B>(&self, request: &Request<B>) -> Option<Uri> {
        let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok());
        let rest = request.uri().path_and_query()?.as_str().strip_prefix(&self.prefix)?;
        let rest =
            if rest.is_empty() || rest.starts_with('?') { format!("/{rest}") } else { rest.into() };
        (host == Some(self.host.as_str()) && rest.starts_with('/')).then(|| rest.parse().ok())?
    }
}

/// Accepts connections until aborted; each one's task ends with it (a `JoinSet`).
async fn serve(listener: tokio::net::TcpListener, shared: Arc<Shared>, served: Served) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        let (shared, served) = (shared.clone(), served.clone());
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
                let (shared, admitted) = (shared.clone(), served.admit(&request));
                async move {
                    let Some(uri) = admitted else {
                        let why = tr!("not the graded program's request: refused");
                        return Ok::<_, Infallible>(status(StatusCode::FORBIDDEN, &why));
                    };
                    *request.uri_mut() = uri;
                    Ok(shared.handle(request).await)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        // Reap the finished ones as we go.
        while connections.try_join_next().is_some() {}
    }
}

/// Headers of one hop, not passed on (RFC 9110, 7.6.1), and the Host (the upstream's is set).
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::HOST,
];

impl Shared {
    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<Body> {
        let kind = classify(request.method(), request.uri(), &self.target);
        self.counts.lock().expect("not poisoned").add(request.method(), request.uri(), kind);
        if kind.is_list() {
            // It lists again: nothing more is owed.
            self.gone_owed.store(0, Ordering::SeqCst);
        }
        if kind == Kind::ResumedWatch && take_one(&self.gone_owed) {
            return gone(request.uri());
        }
        let armed = || self.conflict.lock().expect("not poisoned").take();
        let Some(tell) = (kind == Kind::UpdateOfTarget).then(armed).flatten() else {
            return self.pass(request, kind).await;
        };
        if let Err(e) = self.rival_write().await {
            let _ = tell.send(Err(e));
            return self.pass(request, kind).await;
        }
        let method = request.method().to_string();
        let response = self.pass(request, kind).await;
        let _ = tell.send(Ok(Contested { method, status: response.status().as_u16() }));
        response
    }

    /// Another field manager writes the target: an annotation, nothing the program owns.
    async fn rival_write(&self) -> Result<(), String> {
        let n = self.rival_writes.fetch_add(1, Ordering::SeqCst) + 1;
        let patch = json!({"metadata": {"annotations": {RIVAL_ANNOTATION: n.to_string()}}});
        let params =
            PatchParams { field_manager: Some(RIVAL_MANAGER.into()), ..Default::default() };
        self.api
            .patch(&self.target.name, &params, &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| tr!("the other writer's patch of {name}: {e}", name = self.target.name, e))
    }

    /// The request, passed to the API server (the client adds its address
    /// and the program's token); its response, streamed back.
    async fn pass(self: &Arc<Self>, request: Request<Incoming>, kind: Kind) -> Response<Body> {
        let (mut parts, body) = request.into_parts();
        let asked = can_i(&parts.method, &parts.uri);
        parts.uri = parts.uri.path_and_query().cloned().map_or(Uri::from_static("/"), Uri::from);
        for name in HOP_BY_HOP {
            parts.headers.remove(name);
        }
        let sent = async {
            let body = body.collect().await?.to_bytes().to_vec();
            let request = Request::from_parts(parts, kube::client::Body::from(body));
            self.upstream.send(request).await.map_err(BoxError::from)
        };
        let response = match sent.await {
            Ok(response) => response,
            Err(e) => {
                let why = tr!("the grade's proxy could not reach the API server: {e}", e);
                return status(StatusCode::BAD_GATEWAY, &why);
            }
        };
        let (mut parts, body) = response.into_parts();
        for name in HOP_BY_HOP {
            parts.headers.remove(name);
        }
        match parts.status {
            StatusCode::FORBIDDEN => self.denied.lock().expect("not poisoned").push(asked),
            // An update's conflict, not a create's AlreadyExists.
            StatusCode::CONFLICT if kind == Kind::UpdateOfTarget => {
                self.conflicts.fetch_add(1, Ordering::SeqCst);
            }
            _ => {}
        }
        let body = match kind.is_watch() && parts.status.is_success() {
            true => self.cuttable(body),
            false => body.map_err(BoxError::from).boxed_unsync(),
        };
        Response::from_parts(parts, body)
    }

    /// A watch's body, passed on until [`Proxy::relist`] cuts it; its
    /// receiver of the cut, dropped with it, counts it open.
    fn cuttable(&self, body: kube::client::Body) -> Body {
        let cut = self.cut.subscribe();
        let frames = futures::stream::unfold((body, cut), |(mut body, mut cut)| async move {
            tokio::select! {
                _ = cut.changed() => None,
                frame = body.frame() => match frame? {
                    Ok(frame) => Some((Ok(frame), (body, cut))),
                    Err(e) => Some((Err(BoxError::from(e)), (body, cut))),
                },
            }
        });
        StreamBody::new(frames).boxed_unsync()
    }
}

/// Takes one from `owed` when it is above 0.
fn take_one(owed: &AtomicUsize) -> bool {
    owed.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
}

/// A watch answered as an API server answers one from a compacted
/// resourceVersion: 200, one ERROR event holding a 410 Expired Status, the end.
/// JSON whatever the program asked for: clients decode by the response's type.
fn gone(uri: &Uri) -> Response<Body> {
    let version = query_value(uri.query().unwrap_or_default(), "resourceVersion");
    let event = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
        "metadata": {}, "status": "Failure", "reason": "Expired", "code": 410,
        "message": format!("too old resource version: {}", version.unwrap_or_default())}});
    json_response(StatusCode::OK, format!("{event}\n"))
}

/// An error of the proxy's own, as the API server words errors (a Status).
fn status(code: StatusCode, message: &str) -> Response<Body> {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "code": code.as_u16()});
    json_response(code, body.to_string())
}

fn json_response(code: StatusCode, text: String) -> Response<Body> {
    let body = Full::new(Bytes::from(text)).map_err(|never| match never {}).boxed_unsync();
    let response =
        Response::builder().status(code).header(header::CONTENT_TYPE, "application/json");
    response.body(body).expect("a valid response")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_kubeconfig_names_the_proxy_and_holds_no_token() {
        let yaml = "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: Zm9v\ncontexts:\n- name: lab\n  context: {cluster: lab, user: grade}\ncurrent-context: lab\nusers:\n- name: grade\n  user: {token: secret}\n";
        let kubeconfig = Kubeconfig::from_yaml(yaml).unwrap();
        let through = through(kubeconfig, "127.0.0.1:4711".parse().unwrap(), "s3");
        let cluster = through.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("http://127.0.0.1:4711/s3"));
        assert!(cluster.certificate_authority_data.is_none());
        let text = serde_saphyr::to_string(&through).unwrap();
        assert!(!text.contains("secret"), "{text}");
    }

    #[test]
    fn only_a_request_under_the_secret_with_the_proxys_host_is_admitted() {
        let served = Served { host: "127.0.0.1:4711".into(), prefix: "/s3".into() };
        let admit = |host: &str, uri: &str| {
            let request = Request::builder().uri(uri).header(header::HOST, host).body(());
            served.admit(&request.unwrap()).map(|uri| uri.to_string())
        };
        let path = "/api/v1/namespaces/default/configmaps?watch=true";
        assert_eq!(admit("127.0.0.1:4711", &format!("/s3{path}")).as_deref(), Some(path));
        assert_eq!(admit("127.0.0.1:4711", "/s3?timeout=32s").as_deref(), Some("/?timeout=32s"));
        assert_eq!(admit("127.0.0.1:4711", path), None, "without the secret");
        assert_eq!(admit("127.0.0.1:4711", &format!("/s34{path}")), None, "another secret");
        assert_eq!(admit("evil.example", &format!("/s3{path}")), None, "another Host");
    }

    #[tokio::test]
    async fn a_resumed_watch_owed_a_410_gets_one_event_of_410_expired() {
        let response = gone(
            &"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=42".parse().unwrap(),
        );
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let event: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(event["type"], "ERROR");
        assert_eq!(event["object"]["code"], 410);
        assert_eq!(event["object"]["reason"], "Expired");
        assert_eq!(event["object"]["message"], "too old resource version: 42");
        let owed = AtomicUsize::new(2);
        assert!(take_one(&owed) && take_one(&owed) && !take_one(&owed));
    }
}

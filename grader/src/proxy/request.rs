//! Which of the program's requests the proxy acts on, and how it counts
//! them, from the method, the path and the query alone (bodies are the
//! program's encoding — client-go sends protobuf — and are never read).

use http::{Method, Uri};

/// What a request of the program is, for the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A PUT or PATCH of the target object itself: an update, which may carry
    /// a resourceVersion (and can then conflict).
    UpdateOfTarget,
    /// A watch of ConfigMaps that resumes from a resourceVersion: what the
    /// program sends after its watch ended, and what a relist is forced with.
    ResumedWatch,
    /// A list of ConfigMaps: the program (re)filling its cache.
    List,
    /// A watch that lists first (`sendInitialEvents=true`, client-go's
    /// watch-list), then goes on as a watch: a list too.
    WatchList,
    /// A watch of ConfigMaps from no particular resourceVersion.
    Watch,
    /// Anything else: passed on, not looked at.
    Other,
}

impl Kind {
    /// A response that streams until the proxy cuts it.
    pub fn is_watch(self) -> bool {
        matches!(self, Kind::ResumedWatch | Kind::Watch | Kind::WatchList)
    }

    /// The program fills its cache from the start.
    pub fn is_list(self) -> bool {
        matches!(self, Kind::List | Kind::WatchList)
    }
}

/// The object the grade is about: `namespace/name`, a ConfigMap.
#[derive(Clone, Debug)]
pub struct Target {
    pub namespace: String,
    pub name: String,
}

/// What `method uri` is, for `target`.
pub fn classify(method: &Method, uri: &Uri, target: &Target) -> Kind {
    let path = uri.path().trim_end_matches('/');
    let query = |key: &str| query_value(uri.query().unwrap_or_default(), key);
    // The old watch prefix (/api/v1/watch/…) is a watch whatever its query says.
    let (path, old_watch) = match path.strip_prefix("/api/v1/watch/") {
        Some(rest) => (format!("/api/v1/{rest}"), true),
        None => (path.to_string(), false),
    };
    let namespaced = format!("/api/v1/namespaces/{}/configmaps", target.namespace);
    let collection = path == namespaced || path == "/api/v1/configmaps";
    let object = path == format!("{namespaced}/{}", target.name);
    let watching = old_watch || watch_asked(uri);
    if object && !old_watch && (method == Method::PUT || method == Method::PATCH) {
        return Kind::UpdateOfTarget;
    }
    if method != Method::GET || !(collection || object && watching) {
        return Kind::Other;
    }
    if !watching {
        return if collection { Kind::List } else { Kind::Other };
    }
    if query("sendInitialEvents").as_deref() == Some("true") {
        return Kind::WatchList;
    }
    match query("resourceVersion").as_deref() {
        Some(version) if !version.is_empty() && version != "0" => Kind::ResumedWatch,
        _ => Kind::Watch,
    }
}

/// What the program asked of the API server, by kind of request: every request
/// it made passes the proxy (it has no credentials of its own), so every one is
/// counted — an update that changes nothing and a read an informer would have
/// served from its cache included, which the stored object alone cannot show.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub creates: u64,
    /// Updates and patches.
    pub updates: u64,
    pub deletes: u64,
    /// Gets and lists of ConfigMaps: an informer lists once, a poller again and again.
    pub reads: u64,
    /// Everything else: watches, discovery, other resources.
    pub others: u64,
    /// Of the reads and watches: lists of the target's ConfigMaps, a watch-list included
    /// ([`Kind::is_list`]).
    pub lists: u64,
    /// Of the reads: gets of one ConfigMap.
    pub gets: u64,
}

impl Counts {
    pub fn writes(&self) -> u64 {
        self.creates + self.updates + self.deletes
    }

    pub fn all(&self) -> u64 {
        self.writes() + self.reads + self.others
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            creates: self.creates - earlier.creates,
            updates: self.updates - earlier.updates,
            deletes: self.deletes - earlier.deletes,
            reads: self.reads - earlier.reads,
            others: self.others - earlier.others,
            lists: self.lists - earlier.lists,
            gets: self.gets - earlier.gets,
        }
    }

    /// Counts `method uri` (of `kind`): the verbs on ConfigMaps of any namespace apart, the
    /// rest as others; and the lists and the gets.
    pub fn add(&mut self, method: &Method, uri: &Uri, kind: Kind) {
        self.lists += u64::from(kind.is_list());
        let segments: Vec<&str> = uri.path().trim_end_matches('/').split('/').collect();
        let (collection, object) = match segments.as_slice() {
            ["", "api", "v1", "configmaps"] | ["", "api", "v1", "namespaces", _, "configmaps"] => {
                (true, false)
            }
            ["", "api", "v1", "namespaces", _, "configmaps", _] => (false, true),
            _ => (false, false),
        };
        let watching = watch_asked(uri);
        self.gets += u64::from(object && !watching && method == Method::GET);
        let counter = match *method {
            _ if watching || !(collection || object) => &mut self.others,
            Method::POST if collection => &mut self.creates,
            Method::PUT | Method::PATCH if object => &mut self.updates,
            Method::DELETE => &mut self.deletes,
            Method::GET => &mut self.reads,
            _ => &mut self.others,
        };
        *counter += 1;
    }
}

/// The first value of `key` in a query string (`a=1&b=2`), as sent.
pub fn query_value(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then(|| v.to_string())
    })
}

/// The `watch` parameter as the API server reads it: anything but `0` or
/// `false` (Python's client sends `watch=True`).
fn watch_asked(uri: &Uri) -> bool {
    let value = query_value(uri.query().unwrap_or_default(), "watch");
    value.is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// `method uri` as `kubectl auth can-i` asks it (`list configmaps -A`, `patch
/// configmaps/my-config -n default`): the verb and resource RBAC checked, in the
/// words a learner types to ask the cluster again.
pub fn can_i(method: &Method, uri: &Uri) -> String {
    let path = uri.path().trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let method = method.as_str().to_lowercase();
    let (group, rest) = match segments.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", group, _, rest @ ..] => (*group, rest),
        _ => return format!("{method} {}", if path.is_empty() { "/" } else { path }),
    };
    // The old watch prefix (`…/v1/watch/…`) is a watch whatever the query says.
    let (old_watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        rest => (false, rest),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(*ns), rest),
        rest => (None, rest),
    };
    let Some(first) = rest.first() else { return format!("{method} {path}") };
    let resource = if group.is_empty() { first.to_string() } else { format!("{first}.{group}") };
    let name = rest.get(1);
    // A watch of one object by its path is checked as a get.
    let verb = match (method.as_str(), name, old_watch || name.is_none() && watch_asked(uri)) {
        ("get", _, true) => "watch",
        ("get", Some(_), _) => "get",
        ("get", None, _) => "list",
        ("post", ..) => "create",
        ("put", ..) => "update",
        ("delete", Some(_), _) => "delete",
        ("delete", None, _) => "deletecollection",
        (other, ..) => other,
    };
    let object = name.map_or(resource.clone(), |name| format!("{resource}/{name}"));
    let sub = rest.get(2).map(|s| format!(" --subresource={s}")).unwrap_or_default();
    let scope = namespace.map_or("-A".to_string(), |ns| format!("-n {ns}"));
    format!("{verb} {object}{sub} {scope}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(method: Method, uri: &str) -> Kind {
        let target = Target { namespace: "default".into(), name: "my-config".into() };
        classify(&method, &uri.parse().unwrap(), &target)
    }

    #[test]
    fn an_update_of_my_config_is_a_put_or_patch_of_it_alone() {
        let object = "/api/v1/namespaces/default/configmaps/my-config";
        assert_eq!(kind(Method::PUT, object), Kind::UpdateOfTarget);
        assert_eq!(kind(Method::PATCH, &format!("{object}?fieldManager=me")), Kind::UpdateOfTarget);
        assert_eq!(kind(Method::GET, object), Kind::Other);
        assert_eq!(kind(Method::DELETE, object), Kind::Other);
        // Another ConfigMap, another namespace, a subresource, another resource.
        assert_eq!(kind(Method::PUT, "/api/v1/namespaces/default/configmaps/other"), Kind::Other);
        assert_eq!(
            kind(Method::PUT, "/api/v1/namespaces/kube-system/configmaps/my-config"),
            Kind::Other
        );
        assert_eq!(kind(Method::PUT, &format!("{object}/status")), Kind::Other);
        assert_eq!(kind(Method::PUT, "/api/v1/namespaces/default/secrets/my-config"), Kind::Other);
        assert_eq!(kind(Method::POST, "/api/v1/namespaces/default/configmaps"), Kind::Other);
    }

    #[test]
    fn each_verb_on_config_maps_is_counted_apart_and_the_rest_as_others() {
        let mut counts = Counts::default();
        let one = "/api/v1/namespaces/other/configmaps/a";
        for (method, uri) in [
            (Method::POST, "/api/v1/namespaces/default/configmaps"),
            (Method::PUT, one),
            (Method::PATCH, one),
            (Method::DELETE, one),
            (Method::DELETE, "/api/v1/namespaces/default/configmaps"),
            (Method::GET, one),
            (Method::GET, "/api/v1/configmaps?limit=500"),
            (Method::GET, "/api/v1/namespaces/default/configmaps?watch=true"),
            (Method::GET, "/api/v1/watch/namespaces/default/configmaps"),
            (Method::GET, "/api/v1/namespaces/default/secrets/a"),
            (Method::POST, one),
            (Method::GET, "/version"),
        ] {
            let uri = uri.parse().unwrap();
            let target = Target { namespace: "default".into(), name: "my-config".into() };
            counts.add(&method, &uri, classify(&method, &uri, &target));
        }
        let expected =
            Counts { creates: 1, updates: 2, deletes: 2, reads: 2, others: 5, lists: 1, gets: 1 };
        assert_eq!(counts, expected);
        assert_eq!((counts.writes(), counts.all()), (5, 12));
        assert_eq!(counts.since(&Counts { reads: 1, ..Counts::default() }).reads, 1);
    }

    #[test]
    fn a_request_is_named_as_kubectl_auth_can_i_asks_it() {
        let can = |method: Method, uri: &str| can_i(&method, &uri.parse().unwrap());
        let cm = "/api/v1/namespaces/default/configmaps";
        assert_eq!(can(Method::GET, "/api/v1/configmaps?limit=500"), "list configmaps -A");
        assert_eq!(can(Method::GET, &format!("{cm}?watch=1")), "watch configmaps -n default");
        assert_eq!(can(Method::GET, "/api/v1/watch/configmaps"), "watch configmaps -A");
        let apply = format!("{cm}/my-config?fieldManager=me&force=true");
        assert_eq!(can(Method::PATCH, &apply), "patch configmaps/my-config -n default");
        assert_eq!(can(Method::POST, cm), "create configmaps -n default");
        assert_eq!(can(Method::DELETE, cm), "deletecollection configmaps -n default");
        assert_eq!(
            can(Method::POST, "/apis/events.k8s.io/v1/namespaces/default/events"),
            "create events.events.k8s.io -n default"
        );
        assert_eq!(
            can(Method::PUT, "/apis/apps/v1/namespaces/d/deployments/c/status"),
            "update deployments.apps/c --subresource=status -n d"
        );
        assert_eq!(can(Method::GET, "/api/v1/namespaces/default"), "get namespaces/default -A");
        assert_eq!(can(Method::GET, "/version"), "get /version");
        // Python's client says `watch=True`; a group's old watch prefix; one object watched.
        assert_eq!(can(Method::GET, &format!("{cm}?watch=True")), "watch configmaps -n default");
        assert_eq!(
            can(Method::GET, "/apis/apps/v1/watch/namespaces/d/deployments"),
            "watch deployments.apps -n d"
        );
        assert_eq!(
            can(Method::GET, &format!("{cm}/my-config?watch=1")),
            "get configmaps/my-config -n default"
        );
        assert_eq!(can(Method::GET, &format!("{cm}?watch=false")), "list configmaps -n default");
    }

    #[test]
    fn watches_lists_and_resumed_watches_are_told_apart() {
        let cms = "/api/v1/namespaces/default/configmaps";
        assert_eq!(kind(Method::GET, &format!("{cms}?limit=500&resourceVersion=0")), Kind::List);
        assert_eq!(kind(Method::GET, "/api/v1/configmaps"), Kind::List);
        // client-go's watch-list: a watch that sends the whole list first.
        let watch_list = "?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true";
        assert_eq!(kind(Method::GET, &format!("{cms}{watch_list}")), Kind::WatchList);
        // client-go and kube-rs resuming from where their watch ended.
        let resumed =
            "?allowWatchBookmarks=true&resourceVersion=4711&timeoutSeconds=290&watch=true";
        assert_eq!(kind(Method::GET, &format!("{cms}{resumed}")), Kind::ResumedWatch);
        let by_name = "?fieldSelector=metadata.name%3Dmy-config&watch=1&resourceVersion=12";
        assert_eq!(kind(Method::GET, &format!("{cms}{by_name}")), Kind::ResumedWatch);
        assert_eq!(
            kind(Method::GET, "/api/v1/watch/namespaces/default/configmaps?resourceVersion=9"),
            Kind::ResumedWatch
        );
        assert_eq!(kind(Method::GET, &format!("{cms}?watch=true&resourceVersion=0")), Kind::Watch);
        assert_eq!(kind(Method::GET, &format!("{cms}?watch=true")), Kind::Watch);
        assert_eq!(kind(Method::GET, &format!("{cms}?watch=True")), Kind::Watch);
        assert_eq!(
            kind(Method::GET, "/api/v1/namespaces/default/pods?watch=true&resourceVersion=3"),
            Kind::Other
        );
        assert_eq!(kind(Method::GET, "/apis/apps/v1/deployments"), Kind::Other);
        assert_eq!(kind(Method::GET, "/version"), Kind::Other);
        assert!(Kind::ResumedWatch.is_watch() && Kind::Watch.is_watch());
        assert!(Kind::WatchList.is_watch() && Kind::WatchList.is_list() && Kind::List.is_list());
        assert!(!Kind::List.is_watch() && !Kind::UpdateOfTarget.is_watch());
    }
}

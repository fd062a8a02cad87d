//! Grades without files: `grade --room KUBECONFIG` hands a result in to the attendee's own
//! namespace of the room (a ConfigMap their Role lets them write), and `grade --collect
//! --room NAME` reads every attendee's from the cluster, as `room serve`'s page does.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};

use super::*;
use crate::lab::manifests::FIELD_MANAGER;
use crate::room::{self, GRADE, GRADE_KEY, RoomOptions};

/// Where a grade is handed in: the namespace of an attendee's kubeconfig, as them.
pub(super) struct HandIn {
    client: kube::Client,
    pub(super) namespace: String,
    kubeconfig: String,
}

impl HandIn {
    /// Checked before anything is graded: the file, and a dry run of the hand-in there (its
    /// API server answers, the namespace is there, the Role allows it).
    pub(super) async fn open(kubeconfig: &Path) -> Result<HandIn> {
        let (config, _, _, namespace) =
            crate::lab::existing::one_context(Some(kubeconfig), None, None)?;
        let client = labkit::lab::client_of(config, |_| ()).await?;
        let hand_in = HandIn { client, namespace, kubeconfig: labkit::project::shown(kubeconfig) };
        hand_in.write(&GradeFile::default(), true).await?;
        Ok(hand_in)
    }

    /// The result, as JSON, in ConfigMap [`GRADE`], forced: the name is the kit's, and the
    /// newest replaces any before it. `dry_run`: only asked whether it may.
    pub(super) async fn write(&self, graded: &GradeFile, dry_run: bool) -> Result<()> {
        let (namespace, kubeconfig) = (&self.namespace, &self.kubeconfig);
        if !dry_run {
            labkit::progress!(
                "$ kubectl --kubeconfig {kubeconfig} -n {namespace} apply --server-side --force-conflicts -f -    # ConfigMap {GRADE}, done with kube-rs"
            );
        }
        let data = serde_json::to_string_pretty(graded)?;
        let document = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": GRADE}, "data": {GRADE_KEY: data}});
        let params = PatchParams { dry_run, ..PatchParams::apply(FIELD_MANAGER).force() };
        Api::<ConfigMap>::namespaced(self.client.clone(), namespace)
            .patch(GRADE, &params, &Patch::Apply(document))
            .await
            .with_context(|| tr!("cannot hand the grade in to {namespace}", namespace))?;
        Ok(())
    }
}

/// The room's table: one line per attendee who handed a grade in, what passed and what
/// did not; then who has not.
pub(super) async fn collect(name: &str, texts: &Texts) -> Result<String> {
    let options = RoomOptions { kubeconfig: None, context: None, name: name.to_string() };
    let Some((room, client)) = room::open(&options).await? else {
        bail!("{}", room::not_up(name));
    };
    let mut out = heading(
        texts,
        &[
            "collect_attendee",
            "collect_at",
            "collect_graduated",
            "collect_passed",
            "collect_failing",
        ],
    );
    let mut missing = Vec::new();
    for namespace in &room.namespaces {
        let config_map =
            Api::<ConfigMap>::namespaced(client.clone(), namespace).get_opt(GRADE).await?;
        let text = config_map.and_then(|c| c.data?.remove(GRADE_KEY));
        let Some(graded) = text.and_then(|t| serde_json::from_str::<GradeFile>(&t).ok()) else {
            missing.push(namespace.as_str());
            continue;
        };
        let who = format!("{namespace} ({})", printable(&graded.attendee));
        let passed = graded.rows.iter().filter(|r| r.passed).count();
        let failing: Vec<String> = match &graded.refused {
            Some(refused) => vec![printable(refused.lines().next().unwrap_or_default())],
            None => graded
                .rows
                .iter()
                .filter(|r| !r.passed)
                .map(|r| texts.rows[r.id.key()].clone())
                .collect(),
        };
        let graduated = texts.text(if graded.graduated { "yes" } else { "no" }, &[]);
        let _ = writeln!(
            out,
            "| {who} | {} | {graduated} | {passed}/{} | {} |",
            printable(&graded.graded_at),
            RowId::ALL.len(),
            if failing.is_empty() { "—".to_string() } else { failing.join(", ") }
        );
    }
    let total = room.namespaces.len();
    let (n, total) = ((total - missing.len()).to_string(), total.to_string());
    let head = texts.text("collect_head", &[("room", name), ("n", &n), ("total", &total)]);
    if !missing.is_empty() {
        let _ = writeln!(
            out,
            "\n{}",
            texts.text("collect_missing", &[("namespaces", &missing.join(", "))])
        );
    }
    Ok(format!("{head}\n\n{out}"))
}

/// What an attendee handed in, safe to print in a table on the
/// instructor's terminal: control characters (an escape sequence would
/// drive the terminal) shown escaped, `|` escaped for the table.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '|' => "\\|".to_string(),
            c if c.is_control() => c.escape_default().to_string(),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn what_attendees_hand_in_cannot_drive_the_terminal_or_break_the_table() {
        assert_eq!(printable("ann\u{1b}[2J\r|x\u{7}"), "ann\\u{1b}[2J\\r\\|x\\u{7}");
        assert_eq!(printable("张三 o'brien"), "张三 o'brien");
    }
}

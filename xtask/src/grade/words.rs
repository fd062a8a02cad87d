//! The grade in words: its rows, hints and tables in the reader's language,
//! and the learner's language of code.

use super::*;

/// What the program's Role allows, in a phrase: the course's, or the learner's from `--role`.
pub(super) fn role_text(texts: &Texts, role: &grade::Role, namespace: &str) -> String {
    let rules = role.summary();
    match &role.file {
        None => texts.text("role_course", &[("rules", &rules), ("namespace", namespace)]),
        Some(file) => texts.text(
            "role_file",
            &[("file", &file.display().to_string()), ("rules", &rules), ("namespace", namespace)],
        ),
    }
}

/// What a row's words need besides its own: the texts, the Role's phrase,
/// the language of code its hints show.
pub(super) struct Words<'a> {
    pub(super) texts: &'a Texts,
    pub(super) role: String,
    pub(super) code: CodeLang,
}

impl<'a> Words<'a> {
    pub(super) fn new(
        texts: &'a Texts,
        role: &grade::Role,
        lab: &Lab,
        args: &GradeArgs,
    ) -> Words<'a> {
        Words {
            texts,
            role: role_text(texts, role, lab.desired().namespace()),
            code: args.hint_lang.unwrap_or_else(|| CodeLang::of(&args.command)),
        }
    }

    /// A hint: the part of the course to re-read, then its way in the language(s) of code.
    pub(super) fn hint(&self, hint: Hint) -> String {
        let each = match self.code {
            CodeLang::All => CodeLang::EACH.to_vec(),
            one => vec![one],
        };
        let ways = each.into_iter().map(|lang| {
            let name = self.texts.text(&format!("code_{}", lang.key()), &[]);
            let way = &self.texts.ways(lang)[hint.key()];
            self.texts.text("reread_code", &[("lang", &name), ("way", way)])
        });
        std::iter::once(self.texts.hints[hint.key()].clone())
            .chain(ways)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A row's values as its text takes them: each group `<name>.kind`,
/// `<name>.status`, … made into one phrase `<name>` ([`Texts::stops`]).
pub(super) fn phrases(values: &BTreeMap<String, String>, texts: &Texts) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = values
        .iter()
        .filter(|(k, _)| !k.contains('.'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, kind) in values.iter().filter(|(k, _)| k.ends_with(".kind")) {
        let name = key.trim_end_matches(".kind");
        let parts: Vec<(&str, &str)> = values
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(name)?.strip_prefix('.')?, v.as_str())))
            .collect();
        out.push((name.to_string(), locale::fill(&texts.stops[kind], &parts)));
    }
    out
}

impl GradedRow {
    /// `group_read`: the program's stops were judged from its whole process group.
    pub(super) fn new(row: &grade::Row, words: &Words<'_>, group_read: bool) -> GradedRow {
        let texts = words.texts;
        let phrases = phrases(&row.values, texts);
        let values: Vec<(&str, &str)> =
            phrases.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut seen = vec![locale::fill(&texts.seen[&row.seen], &values)];
        if !row.forbidden.is_empty() {
            // `list configmaps -A` ×5: the words to ask the cluster again, as code.
            let code = |d: &grade::Denied| format!("`{}` ×{}", d.asked, d.times);
            let requests = row.forbidden.iter().map(code).collect::<Vec<_>>().join(", ");
            let role = &words.role;
            seen.push(texts.text("forbidden", &[("requests", &requests), ("role", role)]));
        }
        if row.conflicts > 0 && !row.passed {
            seen.push(texts.text("conflicts", &[("n", &row.conflicts.to_string())]));
        }
        if row.id == RowId::CleanExit && !group_read {
            seen.push(texts.text("judged_alone", &[]));
        }
        GradedRow {
            id: row.id,
            title: texts.rows[row.id.key()].clone(),
            passed: row.passed,
            seen: seen.join(&texts.text("then", &[])),
            reread: row.hint.map(|h| words.hint(h)),
            seen_key: row.seen.clone(),
            values: row.values.clone(),
            hint: row.hint,
            forbidden: row.forbidden.clone(),
            conflicts: row.conflicts,
        }
    }
}

pub(super) fn refused_text(refused: &Refused, texts: &Texts) -> String {
    let reason = locale::fill(
        &texts.refused[refused.reason],
        &[("why", refused.value.as_str()), ("kubeconfig", grade::KUBECONFIG_WORD)],
    );
    format!("{}\n{}", texts.text("refused", &[("reason", &reason)]), program_lines(&refused.detail))
}

/// The program's last lines under their heading, each as `  | …` (as `exp`
/// shows the controller's log): what it printed, told apart from what the
/// grade says.
pub(super) fn program_lines(tail: &str) -> String {
    let mut lines = tail.lines();
    let heading = lines.next().unwrap_or_default().to_string();
    lines.fold(heading, |text, line| format!("{text}\n  | {line}"))
}

/// The tables a person reads — the course's graduation, then what is
/// beyond the course — one line per row; what to re-read; a verdict for each.
pub(super) fn table(graded: &GradeFile, texts: &Texts) -> String {
    let t = |key: &str| texts.text(key, &[]);
    let (mut out, mut rereads, mut verdicts, mut n) = (String::new(), vec![], vec![], 0);
    let mut shown: Vec<(String, String)> = Vec::new();
    for (part, in_course) in [("part_course", true), ("part_beyond", false)] {
        let rows = graded.rows.iter().filter(|r| r.id.in_course() == in_course);
        let _ = write!(
            out,
            "\n{}\n{}",
            t(part),
            heading(texts, &["col_row", "col_result", "col_seen"])
        );
        let mut passed = 0;
        for row in rows {
            n += 1;
            let n = n.to_string();
            passed += usize::from(row.passed);
            let result = if row.passed { t("pass") } else { t("fail") };
            let _ = writeln!(out, "| {n} {} | {result} | {} |", row.title, row.seen);
            if let Some(hint) = &row.reread {
                // A hint said once: a row with the same one names the row that said it.
                let hint = match shown.iter().find(|(h, _)| h == hint) {
                    Some((_, at)) => texts.text("reread_same", &[("n", at)]),
                    None => {
                        shown.push((hint.clone(), n.clone()));
                        hint.clone()
                    }
                };
                let values = [("n", n.as_str()), ("row", &row.title), ("hint", &hint)];
                rereads.push(texts.text("reread_row", &values));
            }
        }
        let total = RowId::ALL.iter().filter(|id| id.in_course() == in_course).count();
        let verdict = match (in_course, graded.graduated) {
            (false, _) => "summary_beyond",
            (true, true) => "summary_graduated",
            (true, false) => "summary_not_graduated",
        };
        let counts = [("passed", passed.to_string()), ("total", total.to_string())];
        verdicts.push(texts.text(verdict, &counts.each_ref().map(|(k, v)| (*k, v.as_str()))));
    }
    if !rereads.is_empty() {
        let _ = writeln!(out, "\n{}\n{}", t("reread"), rereads.join("\n"));
    }
    let _ = writeln!(out, "\n{}", verdicts.join("\n"));
    out
}

/// A table's heading: the texts of `columns`, and the line under them.
pub(super) fn heading(texts: &Texts, columns: &[&str]) -> String {
    let titles: Vec<String> = columns.iter().map(|key| texts.text(key, &[])).collect();
    format!("| {} |\n|{}\n", titles.join(" | "), "---|".repeat(columns.len()))
}

//! `cargo xtask grade --collect DIR`: the room's table from the attendees'
//! JSON files.

use super::*;

/// The room's table: one line per attendee (their newest result), what
/// passed and what did not.
pub(super) fn collect(dir: &Path, texts: &Texts) -> Result<String> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| tr!("cannot read the folder {path}", path = dir.display()))?;
    let mut newest: BTreeMap<String, GradeFile> = BTreeMap::new();
    let mut files = 0;
    for entry in entries {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = labkit::files::read(&path)?;
        let graded: GradeFile = serde_json::from_str(&text).with_context(|| {
            tr!("{path} is not a result of `cargo xtask grade --json`", path = path.display())
        })?;
        files += 1;
        let keep = newest.get(&graded.attendee).is_none_or(|old| old.graded_at < graded.graded_at);
        if keep {
            newest.insert(graded.attendee.clone(), graded);
        }
    }
    let dir_shown = dir.display().to_string();
    if files == 0 {
        return Ok(format!("{}\n", texts.text("collect_none", &[("dir", &dir_shown)])));
    }
    let mut out = format!(
        "{}\n\n{}",
        texts.text("collect_head", &[("files", &files.to_string()), ("dir", &dir_shown)]),
        heading(
            texts,
            &["collect_attendee", "collect_graduated", "collect_passed", "collect_failing"]
        )
    );
    for (attendee, graded) in &newest {
        let attendee = printable(attendee);
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
            "| {attendee} | {graduated} | {passed}/{} | {} |",
            RowId::ALL.len(),
            if failing.is_empty() { "—".to_string() } else { failing.join(", ") }
        );
    }
    Ok(out)
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

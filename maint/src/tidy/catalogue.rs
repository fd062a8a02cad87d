//! The kit's Chinese (`labkit::say`): every `tr!` text of the workspace has its entry in the
//! catalogue (`labkit/zh-CN/*.toml`) with the same placeholders and no English word left,
//! and every entry is a text of the code (a `tr!` text, or a name shown through
//! `labkit::say::translate`, such as a doctor check's).

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{TokenStream, TokenTree};

use super::{docs::TRACKED, read};

/// Each `tr!("…")` text in `tokens`, nested ones too; every text literal into `literals`.
fn texts(tokens: TokenStream, out: &mut Vec<String>, literals: &mut BTreeSet<String>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, tree) in trees.iter().enumerate() {
        if let TokenTree::Literal(literal) = tree
            && let Ok(text) = syn::parse_str::<syn::LitStr>(&literal.to_string())
        {
            literals.insert(text.value());
        }
        let TokenTree::Group(group) = tree else { continue };
        let is_tr = i >= 2
            && matches!(&trees[i - 2], TokenTree::Ident(id) if id == "tr")
            && matches!(&trees[i - 1], TokenTree::Punct(p) if p.as_char() == '!');
        if let (true, Some(TokenTree::Literal(literal))) =
            (is_tr, group.stream().into_iter().next())
        {
            let text = syn::parse_str::<syn::LitStr>(&literal.to_string());
            out.push(text.map_or_else(|e| format!("not a text: {literal} ({e})"), |t| t.value()));
        }
        texts(group.stream(), out, literals);
    }
}

/// The `tr!` texts of the workspace (unit tests aside), each with the first file saying it,
/// and the text literals of its code. A test target says its `tr!` texts to a person too
/// (the e2e suite's runner); its other literals name no entry.
fn said() -> (BTreeMap<String, String>, BTreeSet<String>) {
    let (mut said, mut literals) = (BTreeMap::new(), BTreeSet::new());
    for file in TRACKED.iter().filter(|f| f.ends_with(".rs")) {
        let text = read(file);
        let code = text.split("\n#[cfg(test)]").next().unwrap_or_default();
        let tokens: TokenStream = code.parse().unwrap_or_else(|e| panic!("{file}: {e:?}"));
        let (mut found, mut seen) = (Vec::new(), BTreeSet::new());
        texts(tokens, &mut found, &mut seen);
        if file.contains("/tests/") {
            seen.retain(|literal| found.contains(literal));
        }
        literals.append(&mut seen);
        for text in found {
            said.entry(text).or_insert_with(|| file.clone());
        }
    }
    (said, literals)
}

/// The `{name}` placeholders of `text`.
fn placeholders(text: &str) -> BTreeSet<&str> {
    let names = text.split('{').skip(1).filter_map(|p| p.split_once('}').map(|(name, _)| name));
    names
        .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect()
}

#[test]
fn every_text_the_kit_says_has_its_chinese_and_every_entry_is_said() {
    let (said, literals) = said();
    let mut entries: BTreeMap<String, (String, &str)> = BTreeMap::new();
    let mut wrong = Vec::new();
    for (file, text) in labkit::say::CATALOGUE {
        let table: toml::Table = toml::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
        for (en, zh) in table {
            let zh = zh.as_str().unwrap_or_default().to_string();
            if let Some((_, first)) = entries.insert(en.clone(), (zh, file)) {
                wrong.push(format!("{en:?} is in {first} and in {file}"));
            }
        }
    }
    for (en, file) in &said {
        if !entries.contains_key(en) {
            wrong.push(format!("{file}: {en:?} has no Chinese in labkit/zh-CN/"));
        }
    }
    for (en, (zh, file)) in &entries {
        let english = labkit::english::english_words(zh, Default::default());
        if !literals.contains(en) {
            wrong.push(format!("labkit/zh-CN/{file}: {en:?} is said nowhere"));
        } else if placeholders(zh) != placeholders(en) {
            wrong.push(format!("{en:?} and {zh:?} fill other placeholders"));
        } else if !english.is_empty() {
            wrong.push(format!("{zh:?} (for {en:?}) says English: {english:?}"));
        }
    }
    assert!(wrong.is_empty(), "{} wrong:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn a_tr_text_is_found_nested_and_a_macro_rule_is_not() {
    let code = r#"fn f() { bail!("{}", tr!("no {lab} \"here\"", lab)); let x = tr!(@value a); }"#;
    let (mut found, mut literals) = (Vec::new(), BTreeSet::new());
    texts(code.parse().unwrap(), &mut found, &mut literals);
    assert_eq!(found, ["no {lab} \"here\""]);
    assert!(literals.contains("{}") && literals.contains("no {lab} \"here\""));
}

/// `template`'s fixed parts, between its `{name}` placeholders.
fn pieces(template: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let name = rest[open + 1..].split_once('}').map(|(name, _)| name);
        match name
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        {
            Some(name) => {
                pieces.push(&rest[..open]);
                rest = &rest[open + name.len() + 2..];
            }
            None => break,
        }
    }
    pieces.push(rest);
    pieces
}

/// Whether `text` is `template` with some text for each placeholder.
fn fills(template: &str, text: &str) -> bool {
    let pieces = pieces(template);
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    let Some(mut rest) = text.strip_prefix(first) else { return false };
    if pieces.len() == 1 {
        return rest.is_empty();
    }
    for middle in &pieces[1..pieces.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Each `> ` line of the troubleshooting pages is a message the kit prints, in the page's
/// language: a catalogue text, each `{name}` standing for what the run filled in.
#[test]
fn the_troubleshooting_pages_quote_what_the_kit_prints() {
    let mut texts: Vec<(String, String)> = Vec::new();
    for (_, text) in labkit::say::CATALOGUE {
        let table: toml::Table = toml::from_str(text).unwrap();
        texts.extend(table.into_iter().map(|(en, zh)| (en, zh.as_str().unwrap_or("").into())));
    }
    // A text that is mostly placeholders ("error: {message}") would match anything.
    texts.retain(|(en, _)| pieces(en).concat().len() >= 12);
    for (page, chinese) in
        [("docs/troubleshooting.md", false), ("docs/zh-CN/10-troubleshooting.md", true)]
    {
        let quotes: Vec<String> =
            read(page).lines().filter_map(|l| l.strip_prefix("> ")).map(String::from).collect();
        assert!(quotes.len() >= 10, "{page} quotes {} messages of the kit, not ten", quotes.len());
        for quote in &quotes {
            let message = quote.trim_start_matches("error: ").trim_start_matches("错误：");
            let known = texts.iter().any(|(en, zh)| fills(if chinese { zh } else { en }, message));
            assert!(known, "{page}: the kit prints no such message: {quote}");
        }
    }
}

#[test]
fn a_template_fills_with_any_text_for_each_placeholder() {
    assert!(fills("port {port} in use: pick {other}", "port 8080 in use: pick 8081"));
    assert!(!fills("port {port} in use", "port 8080 in use now"));
    assert!(fills("no lab named {name} is up", "no lab named my-lab is up"));
    assert_eq!(pieces("a {x} b {{.Id}}"), ["a ", " b {{.Id}}"]);
}

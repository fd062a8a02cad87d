//! The JSON documents `-o json` prints, held against their page,
//! docs/output.md: every field a document has is listed there with its type,
//! and every field listed is in the document. Used by the tests of xtask
//! (unit and lab tests alike), so that the page and the code cannot drift.

/// The fields docs/output.md lists for `schema`: the rows `| field | type | … |`
/// of the table under the heading that names it, as (path, type).
pub fn documented_fields(schema: &str) -> Vec<(String, String)> {
    let page = std::fs::read_to_string(crate::project::root().join("docs/output.md"))
        .expect("docs/output.md");
    let mut fields = Vec::new();
    let mut inside = false;
    for line in page.lines() {
        if line.starts_with('#') {
            inside = line.contains(&format!("`{schema}`"));
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if inside && cells.len() >= 4 && cells[1].starts_with('`') {
            fields.push((cells[1].trim_matches('`').to_string(), cells[2].to_string()));
        }
    }
    assert!(!fields.is_empty(), "docs/output.md has no field table for {schema}");
    fields
}

/// Every field of `value` as (path, type), the way docs/output.md names them:
/// `a.b` for an object's field, `a[].b` for a field of an array's items, `a[]`
/// for the items of an array of strings or numbers.
pub fn fields_of(value: &serde_json::Value) -> Vec<(String, String)> {
    fn walk(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
        use serde_json::Value;
        match value {
            Value::Object(map) => {
                for (key, field) in map {
                    let path =
                        if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                    out.push((path.clone(), type_name(field)));
                    walk(&path, field, out);
                }
            }
            Value::Array(items) => {
                let path = format!("{prefix}[]");
                for item in items {
                    if !item.is_object() && !item.is_array() {
                        out.push((path.clone(), type_name(item)));
                    }
                    walk(&path, item, out);
                }
            }
            _ => {}
        }
    }
    fn type_name(value: &serde_json::Value) -> String {
        use serde_json::Value;
        match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_f64() => "number",
            Value::Number(_) => "integer",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
        .to_string()
    }
    let mut out = Vec::new();
    walk("", value, &mut out);
    out.sort();
    out.dedup();
    out
}

/// Asserts that `document` has exactly the fields docs/output.md lists for
/// its `schema`, each of a type the page gives (`integer or null`: either;
/// a `number` may be written as an integer). A field inside an array's items
/// is required when the array has items, a field of an object when it is one
/// (not null); the items of an array of strings may be none.
pub fn assert_documented(document: &serde_json::Value) {
    let schema = document["schema"].as_str().expect("a `schema` field");
    let documented = documented_fields(schema);
    let produced = fields_of(document);
    for (path, kind) in &produced {
        let Some((_, doc_kind)) = documented.iter().find(|(p, _)| p == path) else {
            panic!("{schema}: field {path} ({kind}) is not in docs/output.md");
        };
        let fits =
            doc_kind.split(" or ").any(|k| k == kind || (k == "number" && kind == "integer"));
        assert!(fits, "{schema}: {path} is {kind}, docs/output.md says {doc_kind}");
    }
    for (path, _) in documented.iter().filter(|(p, _)| required(p, &produced)) {
        assert!(
            produced.iter().any(|(p, _)| p == path),
            "{schema}: docs/output.md lists {path}, the document has no such field"
        );
    }
}

/// Whether a document whose fields are `produced` must have the field `path`.
fn required(path: &str, produced: &[(String, String)]) -> bool {
    if path.ends_with("[]") {
        return false;
    }
    match path.rsplit_once('.') {
        None => true,
        Some((items, _)) if items.ends_with("[]") => {
            produced.iter().any(|(p, _)| p.starts_with(&format!("{items}.")))
        }
        Some((object, _)) => produced.iter().any(|(p, t)| p == object && t == "object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_named_by_path_and_type() {
        let fields =
            fields_of(&json!({"a": 1, "b": [{"c": "x"}, {"c": null}], "d": 1.5, "e": ["y"]}));
        let names: Vec<String> = fields.iter().map(|(p, t)| format!("{p}:{t}")).collect();
        assert_eq!(
            names,
            [
                "a:integer",
                "b:array",
                "b[].c:null",
                "b[].c:string",
                "d:number",
                "e:array",
                "e[]:string"
            ]
        );
    }

    #[test]
    fn a_field_of_no_item_or_of_a_null_object_is_not_required() {
        let produced = fields_of(&json!({"a": [], "b": null, "c": [{"d": 1}]}));
        assert!(!required("a[].x", &produced));
        assert!(!required("b.x", &produced));
        assert!(!required("c[].e[]", &produced));
        assert!(required("c[].e", &produced));
        assert!(required("top", &produced));
    }

    #[test]
    #[should_panic(expected = "is not in docs/output.md")]
    fn an_undocumented_field_fails() {
        assert_documented(&json!({"schema": "lab-kit/doctor/v1", "surprise": 1}));
    }
}

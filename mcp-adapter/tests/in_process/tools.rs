//! The tool list: the schema checker itself, and the golden list of tools and schemas.

use super::*;

#[test]
fn schema_checker_catches_mismatches() {
    let schema = json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}, "b": {"$ref": "#/$defs/B"}},
                        "$defs": {"B": {"type": ["string", "null"]}}});
    assert!(check(&schema, &schema, &json!({"a": 1, "b": null}), "$").is_ok());
    assert!(check(&schema, &schema, &json!({"a": "x"}), "$").is_err());
    assert!(check(&schema, &schema, &json!({"b": "x"}), "$").is_err());
    assert!(check(&schema, &schema, &json!({"a": 1, "b": 3}), "$").is_err());
}

/// The tool list is the contract: names, annotations and which fields are required.
/// Regenerate `tests/golden/tools.json` with `UPDATE_GOLDEN=1` after a deliberate change.
#[tokio::test]
async fn tool_list_matches_golden() {
    let h = connect(shared_temp(), Principal::local()).await;
    let mut names: Vec<&str> = h.tools.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, TOOLS);
    let mut summary = serde_json::Map::new();
    for name in TOOLS {
        let t = &h.tools[name];
        assert!(
            t.description.as_ref().is_some_and(|d| d.len() > 20),
            "{name} needs a description"
        );
        let input = Value::Object(t.input_schema.as_ref().clone());
        assert_eq!(input["type"], "object", "{name}");
        for (field, prop) in input["properties"].as_object().into_iter().flatten() {
            assert!(
                prop.get("description").is_some()
                    || prop.get("$ref").is_some()
                    || prop.get("allOf").is_some(),
                "{name}.{field} has no description"
            );
        }
        let output = Value::Object(
            t.output_schema
                .as_ref()
                .expect("output schema")
                .as_ref()
                .clone(),
        );
        assert_eq!(output["type"], "object", "{name} output");
        let a = t.annotations.as_ref().expect("annotations");
        assert_eq!(a.open_world_hint, Some(false), "{name}");
        let mut required: Vec<String> = input["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        required.sort();
        let mut props: Vec<String> = input["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        props.sort();
        summary.insert(
            name.to_owned(),
            json!({
                "title": a.title,
                "read_only": a.read_only_hint.unwrap_or(false),
                "destructive": a.destructive_hint,
                "idempotent": a.idempotent_hint,
                "arguments": props,
                "required": required,
            }),
        );
    }
    let got = serde_json::to_string_pretty(&Value::Object(summary)).unwrap() + "\n";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/tools.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).expect("golden file (run once with UPDATE_GOLDEN=1)");
    assert_eq!(
        got, want,
        "tool list changed; review and regenerate with UPDATE_GOLDEN=1"
    );
}

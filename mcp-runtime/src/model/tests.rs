use super::*;
use serde_json::Value;

#[test]
fn schemas_serialize_back_as_the_server_wrote_them() {
    let schema = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"z":{"type":"integer","minimum":-3,"maximum":9007199254740991},"a":{"type":"number","multipleOf":0.5,"default":1.25},"m":{"$ref":"#/$defs/m"}},"$defs":{"m":{"oneOf":[{"const":"x"},{"enum":[null,true,"\u00e9"]}]}},"required":["z","a"],"additionalProperties":false,"x-vendor":{"b":1,"a":[]}}"##;
    let tool_json = format!(
        r#"{{"name":"t","inputSchema":{schema},"outputSchema":{schema},"somethingNew":{{"k":[1,2]}}}}"#
    );
    let tool: Tool = serde_json::from_str(&tool_json).unwrap();
    assert_eq!(
        serde_json::to_string(&tool.input_schema).unwrap(),
        schema.replace("\\u00e9", "é")
    );
    assert_eq!(
        serde_json::to_string(tool.output_schema.as_ref().unwrap()).unwrap(),
        schema.replace("\\u00e9", "é")
    );
    let back = serde_json::to_string(&tool).unwrap();
    assert_eq!(back, tool_json.replace("\\u00e9", "é"));
}

#[test]
fn content_blocks_round_trip_and_unknown_ones_are_kept() {
    let blocks = serde_json::json!([
        {"type": "text", "text": "hi", "annotations": {"audience": ["user"]}},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "x://1", "blob": "AAE=", "mimeType": "application/octet-stream"}},
        {"type": "resource_link", "uri": "x://2", "name": "two"},
        {"type": "hologram", "depth": 3},
        "not even an object"
    ]);
    let result = CallToolResult::from_value(
        serde_json::json!({"content": blocks.clone(), "isError": true, "novel": 1}),
    )
    .unwrap();
    assert!(result.is_error());
    assert_eq!(result.extra["novel"], 1);
    assert!(
        matches!(&result.content[2], Content::Resource { resource, .. } if resource.blob_bytes() == Some(vec![0, 1]))
    );
    assert!(matches!(&result.content[4], Content::Unknown(_)));
    let again: Vec<Value> = result.content.iter().map(Content::to_value).collect();
    assert_eq!(Value::Array(again), blocks);
}

#[test]
fn tool_hints_follow_the_protocol_defaults() {
    let t: Tool = serde_json::from_value(serde_json::json!({"name": "t"})).unwrap();
    assert!(t.is_destructive() && !t.is_read_only() && !t.is_app_only());
    assert_eq!(t.input_schema, serde_json::json!({"type": "object"}));
    let t: Tool = serde_json::from_value(
        serde_json::json!({"name": "t", "annotations": {"readOnlyHint": true},
        "_meta": {"ui": {"visibility": ["app"]}}}),
    )
    .unwrap();
    assert!(!t.is_destructive() && t.is_read_only() && t.is_app_only());
}

#[test]
fn log_levels_are_the_protocols_names_in_its_order() {
    for (i, level) in LogLevel::ALL.into_iter().enumerate() {
        assert_eq!(level.as_str(), crate::protocol::LOG_LEVELS[i]);
        assert_eq!(level.as_str().parse::<LogLevel>().ok(), Some(level));
    }
}

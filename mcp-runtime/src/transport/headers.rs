//! `Mcp-Name` and `Mcp-Param-*` headers (2026-07-28 Streamable HTTP): which tool
//! arguments a server wants mirrored into headers (`x-mcp-header` in the tool's
//! `inputSchema`), and how values are encoded.

use base64::Engine as _;
use serde_json::Value;

/// Where one `Mcp-Param-{name}` header takes its value from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParamHeader {
    /// The `{name}` part, as the schema wrote it.
    pub name: String,
    /// Property names from the arguments' root to the value.
    pub path: Vec<String>,
}

/// Keywords whose values are data, not schemas: never searched for annotations.
const DATA_KEYWORDS: &[&str] = &["const", "default", "enum", "examples"];

/// Reads the `x-mcp-header` annotations of a tool's input schema. `Err` says why the
/// tool is invalid (and must then be left out of the tool list).
pub(crate) fn param_headers(schema: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut found = Vec::new();
    walk(schema, &mut Vec::new(), true, &mut found)?;
    let mut seen: Vec<String> = Vec::new();
    for h in &found {
        let lower = h.name.to_ascii_lowercase();
        if seen.contains(&lower) {
            return Err(format!("x-mcp-header `{}` is declared twice", h.name));
        }
        seen.push(lower);
    }
    Ok(found)
}

fn walk(
    schema: &Value,
    path: &mut Vec<String>,
    reachable: bool,
    found: &mut Vec<ParamHeader>,
) -> Result<(), String> {
    match schema {
        Value::Object(map) => {
            if let Some(annotation) = map.get("x-mcp-header") {
                let name = annotation.as_str().ok_or("x-mcp-header is not a string")?;
                if name.is_empty() {
                    return Err("x-mcp-header is empty".into());
                }
                if !name.bytes().all(is_tchar) {
                    return Err(format!(
                        "x-mcp-header `{}` is not an HTTP token",
                        name.escape_debug()
                    ));
                }
                if !reachable || path.is_empty() {
                    return Err(format!(
                        "x-mcp-header `{name}` is not on a property reachable through `properties` alone"
                    ));
                }
                let ty = map.get("type").and_then(Value::as_str);
                if !matches!(ty, Some("string" | "integer" | "boolean")) {
                    return Err(format!(
                        "x-mcp-header `{name}` is on a property that is not a string, integer or boolean"
                    ));
                }
                found.push(ParamHeader {
                    name: name.to_owned(),
                    path: path.clone(),
                });
            }
            for (key, value) in map {
                if key == "x-mcp-header" || DATA_KEYWORDS.contains(&key.as_str()) {
                    continue;
                }
                if key == "properties" {
                    if let Value::Object(props) = value {
                        for (name, sub) in props {
                            path.push(name.clone());
                            walk(sub, path, reachable, found)?;
                            path.pop();
                        }
                    }
                } else if value.is_object() || value.is_array() {
                    walk(value, path, false, found)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            for item in items {
                walk(item, path, false, found)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The header value for one argument, or `None` when it is absent or null (no header).
pub(crate) fn header_value(arguments: &Value, path: &[String]) -> Option<String> {
    let mut v = arguments;
    for key in path {
        v = v.get(key)?;
    }
    match v {
        Value::String(s) => Some(encode(s)),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// Encodes a header value: as is when it is plain visible ASCII, otherwise (non-ASCII,
/// control characters, leading or trailing whitespace, or something that looks like an
/// encoded value) as `=?base64?…?=`.
pub(crate) fn encode(s: &str) -> String {
    let visible = s.bytes().all(|b| (0x20..=0x7e).contains(&b) || b == b'\t');
    let padded = s.starts_with([' ', '\t']) || s.ends_with([' ', '\t']);
    let looks_encoded = s.starts_with("=?base64?") && s.ends_with("?=");
    if visible && !padded && !looks_encoded {
        s.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_valid_annotations() {
        let s = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
            "q": {"type": "string", "default": {"x-mcp-header": "not-a-schema"}}
        }});
        let h = param_headers(&s).unwrap();
        assert_eq!(
            h,
            [
                ParamHeader {
                    name: "Region".into(),
                    path: vec!["region".into()]
                },
                ParamHeader {
                    name: "N".into(),
                    path: vec!["opts".into(), "n".into()]
                },
            ]
        );
        let args = json!({"region": "us-west1", "opts": {"n": 3}});
        assert_eq!(header_value(&args, &h[0].path).as_deref(), Some("us-west1"));
        assert_eq!(header_value(&args, &h[1].path).as_deref(), Some("3"));
        assert_eq!(header_value(&json!({"region": null}), &h[0].path), None);
    }

    #[test]
    fn rejects_invalid_annotations() {
        let bad = [
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "Bad Name"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A\r\nB"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "string", "x-mcp-header": "x"}}}),
            json!({"properties": {"a": {"type": "object", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"properties": {"a": {"oneOf": [{"type": "string", "x-mcp-header": "A"}]}}}),
        ];
        for s in bad {
            assert!(param_headers(&s).is_err(), "{s}");
        }
    }

    #[test]
    fn encodes_values_per_the_spec() {
        assert_eq!(encode("us-west1"), "us-west1");
        assert_eq!(encode("a b"), "a b");
        assert_eq!(encode(" lead"), "=?base64?IGxlYWQ=?=");
        assert_eq!(encode("trail "), "=?base64?dHJhaWwg?=");
        assert_eq!(encode("日本"), "=?base64?5pel5pys?=");
        assert_eq!(encode("a\nb"), "=?base64?YQpi?=");
        assert_eq!(encode("=?base64?abc?="), "=?base64?PT9iYXNlNjQ/YWJjPz0=?=");
    }
}

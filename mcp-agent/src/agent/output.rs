//! A typed answer's shape: the JSON Schema a run's final answer must match
//! ([`OutputSpec`]), how the wire is asked for it, and how an answer is read and
//! checked. Kept with the run (in its options), so a resumed run is held to it too.

use mcp_runtime::schema::{describe, Schema};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::model::OutputFormat;

/// The repair rounds a typed run gets unless told otherwise: the model is told once
/// what is wrong with its answer.
pub const DEFAULT_REPAIRS: u32 = 1;

fn default_repairs() -> u32 {
    DEFAULT_REPAIRS
}

/// The shape a run's final answer must take: a JSON Schema (2020-12 unless its
/// `$schema` says otherwise), kept with the run, so a run resumed in another process
/// is held to it too.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputSpec {
    name: String,
    schema: Value,
    #[serde(default = "default_repairs")]
    repairs: u32,
}

impl OutputSpec {
    /// An answer named `name` (`[A-Za-z0-9_-]`, 1 to 64 characters: providers show
    /// it to the model) matching `schema`. An error says what to fix when the name is
    /// not one, or the schema cannot be checked (it refers outside itself, breaks a
    /// bound, or is not a schema).
    pub fn new(name: impl Into<String>, schema: Value) -> Result<OutputSpec> {
        let spec = OutputSpec {
            name: name.into(),
            schema,
            repairs: DEFAULT_REPAIRS,
        };
        spec.checked()?;
        Ok(spec)
    }

    /// The schema of `T` (its `JsonSchema`), named after it.
    pub fn of<T: schemars::JsonSchema>() -> Result<OutputSpec> {
        let schema = schemars::generate::SchemaSettings::draft2020_12()
            .into_generator()
            .into_root_schema_for::<T>();
        let name: String = T::schema_name()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        let name = if name.is_empty() {
            "answer".to_owned()
        } else {
            name
        };
        OutputSpec::new(name, schema.to_value())
    }

    /// How many times the model is told what is wrong with its answer and asked again
    /// before the run ends with [`Outcome::InvalidOutput`] (default
    /// [`DEFAULT_REPAIRS`]; 0: never).
    pub fn repairs(mut self, rounds: u32) -> OutputSpec {
        self.repairs = rounds;
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its schema.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The schema compiled, or an error saying what to fix.
    pub(super) fn checked(&self) -> Result<Schema> {
        if self.name.is_empty()
            || self.name.len() > 64
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(Error::config(format!(
                "the output's name `{}` must be 1 to 64 characters of A-Z, a-z, 0-9, `_` and `-`",
                crate::error::clip(&self.name, 80)
            )));
        }
        Schema::new(&self.schema).map_err(|e| Error::config(format!("the output schema: {e}")))
    }

    pub(super) fn repair_rounds(&self) -> u64 {
        u64::from(self.repairs)
    }

    /// A schema of something else than an object goes to the wire as the `value` of
    /// one (providers want an object).
    fn wrapped(&self) -> bool {
        self.schema.get("type").and_then(Value::as_str) != Some("object")
    }

    /// The shape as the wire sends it.
    pub(super) fn format(&self) -> OutputFormat {
        let schema = if self.wrapped() {
            let mut inner = self.schema.clone();
            // Definitions stay at the root, where the references point; so does the
            // dialect. A reference to anything else of the root now points into
            // `value`.
            let defs = inner.as_object_mut().and_then(|m| m.remove("$defs"));
            let definitions = inner.as_object_mut().and_then(|m| m.remove("definitions"));
            let dialect = inner.as_object_mut().and_then(|m| m.remove("$schema"));
            rebase(&mut inner, 0);
            let mut outer = json!({
                "type": "object",
                "properties": {"value": inner},
                "required": ["value"],
                "additionalProperties": false
            });
            if let Some(defs) = defs {
                outer["$defs"] = defs;
            }
            if let Some(definitions) = definitions {
                outer["definitions"] = definitions;
            }
            if let Some(dialect) = dialect {
                outer["$schema"] = dialect;
            }
            outer
        } else {
            self.schema.clone()
        };
        let strict = strict_compatible(&schema, 0);
        OutputFormat {
            name: self.name.clone(),
            schema,
            strict,
        }
    }

    /// The answer in `text` as canonical JSON, or what is wrong with it (not JSON, or
    /// the violations).
    pub(super) fn read(&self, text: &str) -> std::result::Result<String, String> {
        let schema = self.checked().map_err(|e| e.to_string())?;
        let body = unfenced(text);
        let value: Value = serde_json::from_str(body).map_err(|e| {
            format!("the answer is not JSON ({e}); answer with the JSON value only, no prose")
        })?;
        let value = match value {
            // Unwrapped, when the wire wrapped it (a model may also give it bare).
            Value::Object(mut m) if self.wrapped() && m.len() == 1 && m.contains_key("value") => {
                m.remove("value").unwrap_or(Value::Null)
            }
            v => v,
        };
        match schema.check(&value) {
            Ok(()) => Ok(value.to_string()),
            Err(v) => Err(describe(&v)),
        }
    }
}

/// The references of a schema moved under `#/properties/value` (its `$defs` and
/// `definitions` stayed at the root): `#` and `#/…` into anything else follow it.
fn rebase(v: &mut Value, depth: usize) {
    if depth > mcp_runtime::schema::MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(target)
                        if key == "$ref"
                            && target.starts_with('#')
                            && !target.starts_with("#/$defs/")
                            && !target.starts_with("#/definitions/") =>
                    {
                        *target = format!("#/properties/value{}", &target[1..]);
                    }
                    other => rebase(other, depth + 1),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| rebase(i, depth + 1)),
        _ => {}
    }
}

/// `text` without a Markdown code fence around it (models add them).
fn unfenced(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// The schema keeps to what OpenAI's strict mode takes: every object closed with all
/// its properties required, and only keywords it knows.
fn strict_compatible(schema: &Value, depth: usize) -> bool {
    const KNOWN: &[&str] = &[
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "description",
        "title",
        "anyOf",
        "$defs",
        "$ref",
        "$schema",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "pattern",
        "format",
        "minItems",
        "maxItems",
    ];
    if depth > 32 {
        return false;
    }
    let Some(map) = schema.as_object() else {
        return schema.is_boolean();
    };
    if map.keys().any(|k| !KNOWN.contains(&k.as_str())) {
        return false;
    }
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if map.get("additionalProperties") != Some(&Value::Bool(false))
            || props.keys().any(|k| !required.contains(&k.as_str()))
            || props.values().any(|p| !strict_compatible(p, depth + 1))
        {
            return false;
        }
    } else if map.get("type").and_then(Value::as_str) == Some("object") {
        return false;
    }
    let each = |key: &str| match map.get(key) {
        None => true,
        Some(Value::Array(items)) => items.iter().all(|i| strict_compatible(i, depth + 1)),
        Some(Value::Object(m)) if key == "$defs" => {
            m.values().all(|i| strict_compatible(i, depth + 1))
        }
        Some(v) => strict_compatible(v, depth + 1),
    };
    each("items") && each("anyOf") && each("$defs")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_unfenced_unwrapped_and_checked() {
        let spec = OutputSpec::new(
            "count",
            json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"], "additionalProperties": false}),
        )
        .unwrap();
        assert!(spec.format().strict);
        assert_eq!(spec.read("```json\n{\"n\": 2}\n```").unwrap(), r#"{"n":2}"#);
        let why = spec.read("{\"n\": -1}").unwrap_err();
        assert!(why.contains("at /n") && why.contains("`minimum`"), "{why}");
        assert!(spec.read("two").unwrap_err().contains("not JSON"));
        let list = OutputSpec::new(
            "names",
            json!({"type": "array", "items": {"type": "string"}}),
        )
        .unwrap();
        let f = list.format();
        assert_eq!(f.schema["properties"]["value"]["type"], "array");
        assert_eq!(list.read(r#"{"value": ["a"]}"#).unwrap(), r#"["a"]"#);
        assert_eq!(list.read(r#"["b"]"#).unwrap(), r#"["b"]"#);
        let of = OutputSpec::of::<Vec<u32>>().unwrap();
        let f = of.format();
        assert!(f.schema["properties"]["value"].get("$schema").is_none());
        assert!(f.schema.get("$schema").is_some(), "{}", f.schema);
        assert_eq!(of.read(r#"{"value": [1, 2]}"#).unwrap(), "[1,2]");
        assert!(of.read(r#"{"value": [-1]}"#).is_err());
        // A recursive list of lists: `#` is the list, now under `value`.
        let nested = OutputSpec::new(
            "nested",
            json!({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#"}]},
                   "definitions": {"n": {"type": "integer"}}}),
        )
        .unwrap();
        let f = nested.format();
        assert_eq!(
            f.schema["properties"]["value"]["items"]["anyOf"][1]["$ref"],
            "#/properties/value"
        );
        assert!(f.schema["definitions"]["n"].is_object());
        mcp_runtime::schema::Schema::new(&f.schema).expect("the wrapped schema compiles");
        let loose = OutputSpec::new(
            "loose",
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
        )
        .unwrap();
        assert!(!loose.format().strict, "an open object is not strict");
        assert!(OutputSpec::new("bad name", json!({})).is_err());
        assert!(OutputSpec::new("far", json!({"$ref": "https://127.0.0.1:9/s"})).is_err());
    }
}

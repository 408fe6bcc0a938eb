//! JSON Schema, checked safely: the schemas a server sends (a tool's `inputSchema` and
//! `outputSchema`) and an application's own (an agent's typed answer) compiled once
//! and checked against values, with every bound a hostile schema needs.
//!
//! Drafts 2020-12 (the default when `$schema` is absent), 2019-09, 7, 6 and 4, through
//! the [`jsonschema`](https://docs.rs/jsonschema) crate. What a schema from a server
//! cannot make the client do:
//!
//! * **fetch anything**: a reference outside the schema itself (`https://…`,
//!   `file:…`, another document) is refused when compiling — nothing is retrieved,
//!   whatever features the validator crate was built with;
//! * **recurse without bound**: nesting deeper than [`MAX_DEPTH`] is refused, and so is
//!   a schema whose references, followed, reach more than [`MAX_EXPANDED`] subschemas (a
//!   few lines of `$defs` that refer to each other twice per level would otherwise make
//!   a check take exponential time); a reference back into itself (a recursive schema,
//!   a `$ref` cycle) is followed only as the value being checked gets deeper;
//! * **hold memory**: a schema of more than [`MAX_NODES`] values, or more than
//!   [`MAX_STRING_BYTES`] of strings, is refused;
//! * **take exponential time on a recursive schema**: a schema that refers back into
//!   itself along `n` ≥ 2 paths re-enters itself up to `n` more times at each level of
//!   a value; a value may nest only as deep as keeps `n^depth` under
//!   [`RECURSION_BUDGET`] (16 levels for two paths), deeper is a violation;
//! * **spin on a regular expression**: a `pattern` longer than [`MAX_PATTERN`] bytes is
//!   refused, compiled patterns are size-limited, and backtracking is bounded (a
//!   pattern that hits the bound fails the check instead of running on).
//!
//! A check reports at most [`MAX_VIOLATIONS`] violations, each naming the instance path
//! and the rule, its message clipped.

use std::fmt;

use serde_json::Value;

/// The deepest nesting of a schema.
pub const MAX_DEPTH: usize = 64;
/// The most values (objects, arrays, strings, numbers…) in one schema.
pub const MAX_NODES: usize = 20_000;
/// The most bytes of strings (keys included) in one schema.
pub const MAX_STRING_BYTES: usize = 512 * 1024;
/// The most subschemas one schema may reach with its references followed (back
/// references counted once).
pub const MAX_EXPANDED: usize = 50_000;
/// The longest `pattern` (or `patternProperties` key), in bytes.
pub const MAX_PATTERN: usize = 4096;
/// The most violations one check reports.
pub const MAX_VIOLATIONS: usize = 8;

const MAX_MESSAGE: usize = 300;

/// A compiled schema.
pub struct Schema {
    validator: jsonschema::Validator,
    /// How deep a value may nest to be checked: a schema that refers back into itself
    /// along several paths re-enters itself that many more times at every level of
    /// the value, so a check costs (paths)^(depth). `None`: as deep as parsing allows.
    max_depth: Option<usize>,
}

/// The work one check against a recursive schema may take, in (paths)^(depth): the
/// depth a value may nest is what keeps it under this.
pub const RECURSION_BUDGET: f64 = 100_000.0;

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schema").finish_non_exhaustive()
    }
}

/// Why a schema was not compiled: it breaks a bound, refers outside itself, or is not
/// a valid schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    reason: String,
}

impl SchemaError {
    fn new(reason: impl Into<String>) -> SchemaError {
        SchemaError {
            reason: clip(&reason.into(), MAX_MESSAGE),
        }
    }

    /// What is wrong, for a person (clipped).
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the schema cannot be checked: {}", self.reason)
    }
}

impl std::error::Error for SchemaError {}

/// One way a value breaks a schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Where in the value (a JSON Pointer; empty for the value itself).
    pub path: String,
    /// The rule it breaks (`type`, `required`, `minimum`, …).
    pub keyword: String,
    /// What is wrong, for a person or a model (clipped).
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "at {at}: {} (`{}`)", self.message, self.keyword)
    }
}

/// The violations of one check, as one line: `at /a: … (`minimum`); at /: …`.
pub fn describe(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(Violation::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The violations' paths and rules only (`at /a (`minimum`); at / (`required`)`):
/// nothing of the value, whose messages may quote it.
pub fn describe_rules(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| {
            let at = if v.path.is_empty() { "/" } else { &v.path };
            format!("at {at} (`{}`)", v.keyword)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl Schema {
    /// Compiles `schema`, within every bound (see the module's documentation).
    pub fn new(schema: &Value) -> Result<Schema, SchemaError> {
        let backs = bounded(schema)?;
        // One path back: each level of the value re-enters the schema once.
        let max_depth = (backs >= 2)
            .then(|| ((RECURSION_BUDGET.ln() / (backs as f64).ln()).floor() as usize).max(1));
        let validator = jsonschema::options()
            .with_retriever(NoFetch)
            .with_pattern_options(
                jsonschema::PatternOptions::fancy_regex()
                    .backtrack_limit(100_000)
                    .size_limit(1 << 20)
                    .dfa_size_limit(1 << 20),
            )
            .build(schema)
            .map_err(|e| SchemaError::new(e.to_string()))?;
        Ok(Schema {
            validator,
            max_depth,
        })
    }

    /// True when `value` matches (and nests no deeper than the schema is checked).
    pub fn is_valid(&self, value: &Value) -> bool {
        self.too_deep(value).is_none() && self.validator.is_valid(value)
    }

    /// How deep a value checked against this schema may nest (`None`: as deep as JSON
    /// parsing allows). Deeper values are refused as violations, never checked.
    pub fn max_depth(&self) -> Option<usize> {
        self.max_depth
    }

    /// The violation of a value nested deeper than the schema is checked.
    fn too_deep(&self, value: &Value) -> Option<Violation> {
        let max = self.max_depth?;
        (depth(value, max + 1) > max).then(|| Violation {
            path: String::new(),
            keyword: "depth".into(),
            message: format!(
                "the value nests deeper than {max} levels, as deep as this recursive schema is checked"
            ),
        })
    }

    /// Checks `value`: the violations (at most [`MAX_VIOLATIONS`]) when it does not
    /// match.
    pub fn check(&self, value: &Value) -> Result<(), Vec<Violation>> {
        if let Some(v) = self.too_deep(value) {
            return Err(vec![v]);
        }
        if self.validator.is_valid(value) {
            return Ok(());
        }
        let found: Vec<Violation> = self
            .validator
            .iter_errors(value)
            .take(MAX_VIOLATIONS)
            .map(|e| Violation {
                path: clip(e.instance_path().as_str(), MAX_MESSAGE),
                keyword: clip(e.kind().keyword(), 64),
                message: clip(&e.to_string(), MAX_MESSAGE),
            })
            .collect();
        if found.is_empty() {
            // `is_valid` and `iter_errors` disagree only if the crate has a bug: still
            // a mismatch, never a pass.
            return Err(vec![Violation {
                path: String::new(),
                keyword: "schema".into(),
                message: "the value does not match the schema".into(),
            }]);
        }
        Err(found)
    }
}

/// The retriever of every compile: nothing outside the schema is ever fetched.
struct NoFetch;

impl jsonschema::Retrieve for NoFetch {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!(
            "`{}` is outside the schema: references are followed only within it",
            clip(uri.as_str(), 200)
        )
        .into())
    }
}

/// Keywords whose value is one schema.
const ONE: &[&str] = &[
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
    "contentSchema",
    "items",
];
/// Keywords whose value is an array of schemas (`items` too, in draft 7 and before).
const MANY: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value maps names to schemas.
const MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
];

/// The bounds checked before compiling: size, depth, pattern length, and the number
/// of subschemas reached with references followed. Returns the most paths back into
/// itself found under one reference (0: the schema is not recursive).
fn bounded(schema: &Value) -> Result<usize, SchemaError> {
    let mut nodes = 0usize;
    let mut bytes = 0usize;
    size(schema, 0, &mut nodes, &mut bytes)?;
    let mut walk = Walk {
        reached: 0,
        stack: Vec::new(),
        backs: 0,
        widest: 0,
    };
    expand(schema, schema, &mut walk, 0)?;
    // A reference back at the root (no reference followed above it) counts too.
    Ok(walk.widest.max(walk.backs.min(1)))
}

/// How deep `v` nests (a scalar: 0), counted up to `max` (then it stops).
fn depth(v: &Value, max: usize) -> usize {
    let mut deepest = 0;
    let mut todo = vec![(v, 0usize)];
    while let Some((v, d)) = todo.pop() {
        deepest = deepest.max(d);
        if deepest >= max {
            return deepest;
        }
        match v {
            Value::Array(items) => todo.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(map) => todo.extend(map.values().map(|i| (i, d + 1))),
            _ => {}
        }
    }
    deepest
}

/// Where a walk of a schema's subschemas stands.
struct Walk {
    reached: usize,
    /// The references followed on the way here.
    stack: Vec<String>,
    /// The references that led back to one on the way.
    backs: usize,
    /// The most of them found under one reference followed.
    widest: usize,
}

fn size(v: &Value, depth: usize, nodes: &mut usize, bytes: &mut usize) -> Result<(), SchemaError> {
    if depth > MAX_DEPTH {
        return Err(SchemaError::new(format!(
            "it nests deeper than {MAX_DEPTH} levels"
        )));
    }
    *nodes += 1;
    if *nodes > MAX_NODES {
        return Err(SchemaError::new(format!(
            "it has more than {MAX_NODES} values"
        )));
    }
    match v {
        Value::String(s) => *bytes += s.len(),
        Value::Array(items) => {
            for i in items {
                size(i, depth + 1, nodes, bytes)?;
            }
        }
        Value::Object(map) => {
            for (k, i) in map {
                *bytes += k.len();
                size(i, depth + 1, nodes, bytes)?;
            }
        }
        _ => {}
    }
    if *bytes > MAX_STRING_BYTES {
        return Err(SchemaError::new(format!(
            "its strings pass {MAX_STRING_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Walks the subschemas of `node` with each local reference followed (a reference to
/// one already on the way here counted once): more than [`MAX_EXPANDED`] is refused.
fn expand(root: &Value, node: &Value, walk: &mut Walk, depth: usize) -> Result<(), SchemaError> {
    walk.reached += 1;
    if walk.reached > MAX_EXPANDED {
        return Err(SchemaError::new(format!(
            "its references, followed, reach more than {MAX_EXPANDED} subschemas"
        )));
    }
    // Deep chains of references (each resolving to the next) count as depth too.
    if depth > 4 * MAX_DEPTH {
        return Err(SchemaError::new(format!(
            "its references nest deeper than {} levels",
            4 * MAX_DEPTH
        )));
    }
    let Value::Object(map) = node else {
        return Ok(());
    };
    for key in ["pattern"] {
        if let Some(Value::String(p)) = map.get(key) {
            if p.len() > MAX_PATTERN {
                return Err(SchemaError::new(format!(
                    "a `pattern` is longer than {MAX_PATTERN} bytes"
                )));
            }
        }
    }
    if let Some(Value::Object(props)) = map.get("patternProperties") {
        if props.keys().any(|k| k.len() > MAX_PATTERN) {
            return Err(SchemaError::new(format!(
                "a `patternProperties` pattern is longer than {MAX_PATTERN} bytes"
            )));
        }
    }
    for key in ["$ref", "$dynamicRef", "$recursiveRef"] {
        let Some(target) = map.get(key) else { continue };
        let Some(target) = target.as_str() else {
            return Err(SchemaError::new(format!("`{key}` is not a string")));
        };
        let Some(resolved) = local(root, target) else {
            return Err(SchemaError::new(format!(
                "`{key}: {}` does not point into the schema itself (`#` or `#/…`)",
                clip(target, 200)
            )));
        };
        if walk.stack.iter().any(|s| s == target) {
            walk.backs += 1;
            continue;
        }
        walk.stack.push(target.to_owned());
        let before = walk.backs;
        let r = expand(root, resolved, walk, depth + 1);
        walk.stack.pop();
        r?;
        // The paths back found under this reference: how many times the schema can
        // re-enter itself per level of a value.
        walk.widest = walk.widest.max(walk.backs - before);
    }
    for (key, value) in map {
        let key = key.as_str();
        if key == "$id" && depth > 0 && !value.as_str().is_some_and(|s| s.starts_with('#')) {
            // A nested resource changes what `#/…` means below it: not followed.
            return Err(SchemaError::new(
                "a nested `$id` (a schema within the schema) is not supported",
            ));
        }
        if ONE.contains(&key) && value.is_object() {
            expand(root, value, walk, depth + 1)?;
        }
        if MANY.contains(&key) {
            if let Value::Array(items) = value {
                for i in items {
                    expand(root, i, walk, depth + 1)?;
                }
            }
        }
        if MAP.contains(&key) {
            if let Value::Object(m) = value {
                for i in m.values() {
                    // `dependencies` (draft 7) maps to a schema or a list of names.
                    if i.is_object() {
                        expand(root, i, walk, depth + 1)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// What a local reference (`#` or `#/a/b`, percent- and `~`-escaped) points at.
fn local<'v>(root: &'v Value, target: &str) -> Option<&'v Value> {
    let pointer = target.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    if !pointer.starts_with('/') {
        return None;
    }
    let decoded = percent_decode(pointer)?;
    root.pointer(&decoded)
}

fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_violation_names_the_path_and_the_rule() {
        let s = Schema::new(&json!({
            "type": "object",
            "properties": {"a": {"type": "integer", "minimum": 3}},
            "required": ["a", "b"]
        }))
        .expect("compiles");
        assert!(s.check(&json!({"a": 4, "b": 1})).is_ok());
        let v = s.check(&json!({"a": 1})).expect_err("violates");
        assert!(v.iter().any(|v| v.path == "/a" && v.keyword == "minimum"));
        assert!(v
            .iter()
            .any(|v| v.path.is_empty() && v.keyword == "required"));
        let line = describe(&v);
        assert!(
            line.contains("at /a:") && line.contains("(`minimum`)"),
            "{line}"
        );
    }

    #[test]
    fn draft_7_schemas_are_checked_as_draft_7() {
        let s = Schema::new(&json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"name": {"type": "string"}},
            "properties": {"a": {"$ref": "#/definitions/name"}},
            "items": [{"type": "integer"}]
        }))
        .expect("compiles");
        assert!(s.check(&json!({"a": 1})).is_err());
        assert!(s.check(&json!({"a": "x"})).is_ok());
    }

    #[test]
    fn nothing_outside_the_schema_is_fetched() {
        for target in [
            "https://127.0.0.1:9/s.json",
            "file:///etc/passwd",
            "other.json#/a",
            "#anchor",
        ] {
            let e =
                Schema::new(&json!({"properties": {"a": {"$ref": target}}})).expect_err("refused");
            assert!(e.reason().contains("does not point into"), "{e}");
        }
        // Inside `const`, a `$ref` is data, not a reference.
        assert!(Schema::new(&json!({"const": {"$ref": "https://x"}})).is_ok());
    }

    #[test]
    fn hostile_schemas_are_refused_or_bounded() {
        let mut deep = json!({"type": "integer"});
        for _ in 0..100 {
            deep = json!({"items": deep});
        }
        assert!(Schema::new(&deep)
            .expect_err("deep")
            .reason()
            .contains("nests"));
        // Each level refers twice to the next: 2^40 subschemas if followed.
        let mut defs = serde_json::Map::new();
        for i in 0..40 {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(
                format!("d{i}"),
                json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert("d40".into(), json!({"type": "string"}));
        let bomb = json!({"$defs": defs, "$ref": "#/$defs/d0"});
        assert!(Schema::new(&bomb)
            .expect_err("bomb")
            .reason()
            .contains("reach more than"));
        // Cycles are fine: followed only as the value gets deeper.
        let cyclic = json!({
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "array", "items": {"$ref": "#"}}]}},
            "$ref": "#/$defs/a"
        });
        let s = Schema::new(&cyclic).expect("a cycle compiles");
        let _ = s.check(&json!([[[1]]]));
        // Each level tries two branches that both recurse: listing every error of a
        // failing value 40 deep would take 2^40 steps; the check says it fails.
        let two_ways = json!({
            "$defs": {"a": {"anyOf": [
                {"type": "array", "items": {"$ref": "#/$defs/a"}},
                {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/a"}}
            ]}},
            "$ref": "#/$defs/a"
        });
        let s = Schema::new(&two_ways).expect("compiles");
        let mut deep = json!("x");
        for _ in 0..40 {
            deep = json!([deep]);
        }
        assert_eq!(s.max_depth(), Some(16));
        let v = s.check(&deep).expect_err("too deep to check");
        assert_eq!(v.len(), 1);
        assert!(
            v[0].keyword == "depth" && v[0].message.contains("16 levels"),
            "{v:?}"
        );
        assert!(!s.is_valid(&deep));
        assert!(s.check(&json!([[]])).is_ok());
        let mut shallow = json!("x");
        for _ in 0..12 {
            shallow = json!([shallow]);
        }
        assert!(s.check(&shallow).is_err(), "checked: a string is no array");
        // A linked list refers back once: no depth bound.
        let list = json!({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}});
        assert_eq!(Schema::new(&list).unwrap().max_depth(), None);
        assert!(Schema::new(&json!({"allOf": [{"$ref": "#"}]})).is_ok());
        let long = "a".repeat(MAX_PATTERN + 1);
        assert!(Schema::new(&json!({"pattern": long})).is_err());
        // A pattern that would backtrack for ever fails the check instead.
        let s = Schema::new(&json!({"type": "string", "pattern": "^(a+)+$"})).expect("compiles");
        assert!(s.check(&json!(format!("{}!", "a".repeat(64)))).is_err());
        assert!(Schema::new(&json!({"pattern": "(a{1000}){1000}"})).is_err());
    }
}

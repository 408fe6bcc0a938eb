//! Digests that pin what a person approved: a value's canonical JSON (object keys
//! sorted, no whitespace, whatever order the value was built in) hashed with SHA-256,
//! written `sha256:` and 64 lowercase hex digits. Used for a tool's definition
//! ([`McpTool::definition_digest`](crate::McpTool::definition_digest)), a server's
//! configuration ([`Mcp::config_fingerprint`](crate::Mcp::config_fingerprint)), a
//! call's arguments, and a skill's fingerprint. A value that may be a secret (an
//! environment variable's, a header's) enters a digest only as its HMAC-SHA-256 under
//! a key the application chooses
//! ([`Mcp::config_fingerprint_keyed`](crate::Mcp::config_fingerprint_keyed)).

use serde_json::Value;

pub(crate) mod sha256;
use sha256::sha256;

/// `v` as canonical JSON: object keys sorted at every level, no whitespace.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::with_capacity(256);
    write_canonical(v, &mut out);
    // Only JSON text (valid UTF-8) was written.
    String::from_utf8(out).unwrap_or_default()
}

/// Writes `v` as canonical JSON into `out`, in one buffer (a string, a number, a
/// key written as `serde_json` writes it).
fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                // Writing a string into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut *out, k);
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(v, out);
            }
            out.push(b']');
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

/// The SHA-256 digest of `v`'s canonical JSON: `sha256:<64 hex>`.
pub fn sha256_json(v: &Value) -> String {
    format!("sha256:{}", hex(&sha256(canonical_json(v).as_bytes())))
}

/// HMAC-SHA-256 of `value` under `key`, as lowercase hex: how a value that may be a
/// secret enters a digest. Any key length works (an empty key too).
pub(crate) fn hmac_sha256_hex(key: &[u8], value: &[u8]) -> String {
    hex(&sha256::hmac_sha256(key, value))
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_matter_and_values_do() {
        let a = json!({"b": 1, "a": {"y": [1, "x"], "x": null}});
        let b = json!({"a": {"x": null, "y": [1, "x"]}, "b": 1});
        assert_eq!(canonical_json(&a), r#"{"a":{"x":null,"y":[1,"x"]},"b":1}"#);
        assert_eq!(sha256_json(&a), sha256_json(&b));
        assert_ne!(
            sha256_json(&a),
            sha256_json(&json!({"b": 2, "a": {"x": null, "y": [1, "x"]}}))
        );
        assert!(sha256_json(&a).starts_with("sha256:") && sha256_json(&a).len() == 71);
    }

    /// The one-buffer writer writes what the writer before it wrote (digests and MACs
    /// kept before stay valid): keys sorted and escaped, strings escaped, numbers as
    /// serde_json writes them.
    #[test]
    fn canonical_json_is_what_it_was() {
        fn before(v: &Value) -> String {
            match v {
                Value::Object(m) => {
                    let mut keys: Vec<&String> = m.keys().collect();
                    keys.sort();
                    let parts: Vec<String> = keys
                        .into_iter()
                        .map(|k| format!("{}:{}", Value::String(k.clone()), before(&m[k])))
                        .collect();
                    format!("{{{}}}", parts.join(","))
                }
                Value::Array(a) => {
                    format!("[{}]", a.iter().map(before).collect::<Vec<_>>().join(","))
                }
                other => other.to_string(),
            }
        }
        let v = json!({
            "z": [1, -2.5, 1e300, u64::MAX, i64::MIN, true, null, "é\u{1F600}\n\"\\"],
            "a\u{0}key": {"b": {}, "a": [], "\u{7f}": "\u{2028}"},
            "": "empty key", "A": 0.1
        });
        assert_eq!(canonical_json(&v), before(&v));
        assert_eq!(canonical_json(&json!("x")), "\"x\"");
        assert_eq!(canonical_json(&json!([])), "[]");
    }

    #[test]
    fn hmac_matches_rfc_4231_and_depends_on_the_key() {
        // RFC 4231, test case 2.
        assert_eq!(
            hmac_sha256_hex(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_ne!(hmac_sha256_hex(b"", b"v"), hmac_sha256_hex(b"k", b"v"));
        assert_eq!(hmac_sha256_hex(b"", b"v").len(), 64);
    }
}

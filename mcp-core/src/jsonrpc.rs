//! JSON-RPC 2.0 messages, as MCP uses them.
//!
//! A message from the server is parsed once, from bytes, into a [`Message`]; params and
//! results stay [`serde_json::Value`]s (with key order preserved) until a typed view is
//! taken of them by moving, not copying, their contents.

use std::fmt;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request id: a string or an integer, never null.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Number(n) => s.serialize_i64(*n),
            Id::String(v) => s.serialize_str(v),
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or integer id")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Id, E> {
                Ok(Id::Number(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id, E> {
                i64::try_from(v)
                    .map(Id::Number)
                    .map_err(|_| E::custom("id out of range"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Id, E> {
                Ok(Id::String(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Id, E> {
                Ok(Id::String(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// A request: it expects one response with the same id.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The id the response will carry.
    pub id: Id,
    /// The method, such as `tools/call`.
    pub method: String,
    /// The params object (MCP requests always have one).
    pub params: Value,
}

/// A notification: no id, no response.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// The method, such as `notifications/progress`.
    pub method: String,
    /// The params, if any.
    pub params: Option<Value>,
}

/// The error object of an error response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code.
    pub code: i64,
    /// A short description.
    #[serde(default)]
    pub message: String,
    /// More about the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error object with this code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// A response to a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// The id of the request this answers.
    pub id: Id,
    /// The result, or the error.
    pub outcome: Result<Value, ErrorObject>,
}

/// Any JSON-RPC message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response.
    Response(Response),
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<Id>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Envelope {
    fn into_message(self) -> Result<Message, String> {
        match (self.method, self.id) {
            (Some(method), Some(id)) => Ok(Message::Request(Request {
                id,
                method,
                params: self.params.unwrap_or(Value::Object(Default::default())),
            })),
            (Some(method), None) => Ok(Message::Notification(Notification {
                method,
                params: self.params,
            })),
            (None, Some(id)) => {
                let outcome = match (self.result, self.error) {
                    (_, Some(error)) => Err(error),
                    (Some(result), None) => Ok(result),
                    (None, None) => {
                        return Err(format!("response {id} has neither result nor error"))
                    }
                };
                Ok(Message::Response(Response { id, outcome }))
            }
            (None, None) => match self.error {
                Some(e) => Err(format!(
                    "error without a request id: {} {}",
                    e.code, e.message
                )),
                None => Err("message has neither method nor id".to_owned()),
            },
        }
    }
}

impl Message {
    /// Parses one line or body from the server: a single message or (from 2025-03-26
    /// servers) a batch. Each element of a batch is parsed on its own, so one bad element
    /// does not lose the others: it comes back as an `Err` in its place.
    pub fn parse(bytes: &[u8]) -> Result<Vec<Result<Message, String>>, String> {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if first == Some(&b'[') {
            let items: Vec<Value> = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
            if items.is_empty() {
                return Err("empty batch".to_owned());
            }
            Ok(items
                .into_iter()
                .map(|v| {
                    Envelope::deserialize(v)
                        .map_err(|e| e.to_string())
                        .and_then(Envelope::into_message)
                })
                .collect())
        } else {
            let env: Envelope = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
            Ok(vec![env.into_message()])
        }
    }

    /// Parses a message already decoded as JSON (custom transports hand these over).
    pub fn from_value(value: Value) -> Result<Message, String> {
        Envelope::deserialize(value)
            .map_err(|e| e.to_string())
            .and_then(Envelope::into_message)
    }

    /// Serializes the message as compact JSON.
    pub fn to_vec(&self) -> Vec<u8> {
        // Serializing a Value-based message cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Message::Request(r) => r.serialize(s),
            Message::Notification(n) => n.serialize(s),
            Message::Response(r) => r.serialize(s),
        }
    }
}

impl Request {
    /// The request as JSON bytes (serialized in place: nothing is copied first).
    pub fn to_vec(&self) -> Vec<u8> {
        // Serializing a Value-based request cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

impl Serialize for Request {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("jsonrpc", "2.0")?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("method", &self.method)?;
        m.serialize_entry("params", &self.params)?;
        m.end()
    }
}

impl Serialize for Notification {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("jsonrpc", "2.0")?;
        m.serialize_entry("method", &self.method)?;
        if let Some(p) = &self.params {
            m.serialize_entry("params", p)?;
        }
        m.end()
    }
}

impl Serialize for Response {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("jsonrpc", "2.0")?;
        m.serialize_entry("id", &self.id)?;
        match &self.outcome {
            Ok(v) => m.serialize_entry("result", v)?,
            Err(e) => m.serialize_entry("error", e)?,
        }
        m.end()
    }
}

impl From<Request> for Message {
    fn from(r: Request) -> Self {
        Message::Request(r)
    }
}
impl From<Notification> for Message {
    fn from(n: Notification) -> Self {
        Message::Notification(n)
    }
}
impl From<Response> for Message {
    fn from(r: Response) -> Self {
        Message::Response(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_kind_and_batches() {
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":1,"result":null}"#).unwrap();
        assert!(matches!(&m[0], Ok(Message::Response(r)) if r.outcome == Ok(Value::Null)));
        let m = Message::parse(br#"[{"jsonrpc":"2.0","method":"a"},{"bad":1},{"jsonrpc":"2.0","id":"x","method":"ping"}]"#).unwrap();
        assert_eq!(m.len(), 3);
        assert!(matches!(&m[0], Ok(Message::Notification(_))));
        assert!(m[1].is_err());
        assert!(matches!(&m[2], Ok(Message::Request(r)) if r.id == Id::String("x".into())));
        assert!(Message::parse(b"not json").is_err());
        let m =
            Message::parse(br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"nope"}}"#)
                .unwrap();
        assert!(
            matches!(&m[0], Ok(Message::Response(Response { outcome: Err(e), .. })) if e.code == -32601)
        );
    }

    /// Found by the `jsonrpc` fuzz target: a number read and written back must read
    /// as the same number (serde_json's `float_roundtrip`; without it this one moved by
    /// one unit in the last place).
    #[test]
    fn numbers_read_back_as_themselves() {
        for text in ["9.999999999900001e+24", "2.5e-3", "0.1", "1e308", "-0.0"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"n":{text}}}}}"#);
            let m = Message::parse(line.as_bytes()).unwrap().remove(0).unwrap();
            let again = Message::parse(&m.to_vec()).unwrap().remove(0).unwrap();
            assert_eq!(again, m, "{text}");
        }
    }
}

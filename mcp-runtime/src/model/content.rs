//! Content blocks of tool results and prompt messages, kept as sent.

#[allow(unused_imports)]
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Resource, ResourceContents};

/// One block of content in a tool result or prompt message.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Content {
    /// Text.
    Text {
        /// The text.
        text: String,
        /// `annotations` and `_meta`, as sent.
        meta: Extras,
    },
    /// An image, base64-encoded.
    Image {
        /// Base64 data.
        data: String,
        /// MIME type.
        mime_type: String,
        /// `annotations` and `_meta`, as sent.
        meta: Extras,
    },
    /// Audio, base64-encoded.
    Audio {
        /// Base64 data.
        data: String,
        /// MIME type.
        mime_type: String,
        /// `annotations` and `_meta`, as sent.
        meta: Extras,
    },
    /// A link to a resource the client may read.
    ResourceLink(Resource),
    /// A resource embedded in the result.
    Resource {
        /// The contents.
        resource: ResourceContents,
        /// `annotations` and `_meta`, as sent.
        meta: Extras,
    },
    /// A block of a type this crate does not know, as sent.
    Unknown(Value),
}

/// The fields of a content block other than its payload (`annotations`, `_meta`, and
/// anything else), kept as sent.
pub type Extras = Map<String, Value>;

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text {
            text: text.into(),
            meta: Map::new(),
        }
    }

    /// Reads a content block, moving its contents. Never fails: what cannot be read is
    /// kept as [`Content::Unknown`].
    pub fn from_value(value: Value) -> Self {
        let Value::Object(mut map) = value else {
            return Content::Unknown(value);
        };
        let kind = match map.get("type").and_then(Value::as_str) {
            Some(k) => k.to_owned(),
            None => return Content::Unknown(Value::Object(map)),
        };
        let take_str = |map: &mut Map<String, Value>, key: &str| match map.shift_remove(key) {
            Some(Value::String(s)) => Some(s),
            Some(other) => {
                map.insert(key.to_owned(), other);
                None
            }
            None => None,
        };
        match kind.as_str() {
            "text" => match take_str(&mut map, "text") {
                Some(text) => {
                    map.shift_remove("type");
                    Content::Text { text, meta: map }
                }
                None => Content::Unknown(Value::Object(map)),
            },
            "image" | "audio" => {
                let (Some(data), Some(mime_type)) =
                    (take_str(&mut map, "data"), take_str(&mut map, "mimeType"))
                else {
                    return Content::Unknown(Value::Object(map));
                };
                map.shift_remove("type");
                if kind == "image" {
                    Content::Image {
                        data,
                        mime_type,
                        meta: map,
                    }
                } else {
                    Content::Audio {
                        data,
                        mime_type,
                        meta: map,
                    }
                }
            }
            "resource_link" => {
                let mut v = Value::Object(map);
                if let Some(m) = v.as_object_mut() {
                    m.shift_remove("type");
                }
                match serde_json::from_value::<Resource>(v.clone()) {
                    Ok(r) => Content::ResourceLink(r),
                    Err(_) => Content::Unknown(v),
                }
            }
            "resource" => match map.shift_remove("resource") {
                Some(r) => match serde_json::from_value::<ResourceContents>(r) {
                    Ok(resource) => {
                        map.shift_remove("type");
                        Content::Resource {
                            resource,
                            meta: map,
                        }
                    }
                    Err(_) => Content::Unknown(Value::Object(map)),
                },
                None => Content::Unknown(Value::Object(map)),
            },
            _ => Content::Unknown(Value::Object(map)),
        }
    }

    /// The block as JSON, as the protocol writes it.
    pub fn to_value(&self) -> Value {
        fn with(kind: &str, meta: &Extras, fields: &[(&str, Value)]) -> Value {
            let mut m = Map::new();
            m.insert("type".into(), Value::String(kind.into()));
            for (k, v) in fields {
                m.insert((*k).into(), v.clone());
            }
            for (k, v) in meta {
                m.insert(k.clone(), v.clone());
            }
            Value::Object(m)
        }
        match self {
            Content::Text { text, meta } => with("text", meta, &[("text", text.as_str().into())]),
            Content::Image {
                data,
                mime_type,
                meta,
            } => with(
                "image",
                meta,
                &[
                    ("data", data.as_str().into()),
                    ("mimeType", mime_type.as_str().into()),
                ],
            ),
            Content::Audio {
                data,
                mime_type,
                meta,
            } => with(
                "audio",
                meta,
                &[
                    ("data", data.as_str().into()),
                    ("mimeType", mime_type.as_str().into()),
                ],
            ),
            Content::ResourceLink(r) => {
                let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
                if let Some(m) = v.as_object_mut() {
                    m.insert("type".into(), "resource_link".into());
                }
                v
            }
            Content::Resource { resource, meta } => with(
                "resource",
                meta,
                &[(
                    "resource",
                    serde_json::to_value(resource).unwrap_or(Value::Null),
                )],
            ),
            Content::Unknown(v) => v.clone(),
        }
    }
}

impl Serialize for Content {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Value::deserialize(d).map(Content::from_value)
    }
}

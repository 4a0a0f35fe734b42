//! Hook events as JSON, read strictly: what one JSON parser reads differently from
//! another is not read at all.
//!
//! An object with the same key twice is refused (serde_json keeps the last, other
//! parsers the first, so the agent and Attest could see two different calls); so are a
//! lone surrogate in a `\u` escape (serde_json refuses it) and nesting deeper than
//! serde_json's limit of 128. The size bound is the caller's (the event is read with
//! one).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// One JSON text as a value, or why it is not read.
pub(crate) fn parse(text: &[u8]) -> Result<Value, String> {
    serde_json::from_slice::<Strict>(text)
        .map(|Strict(value)| value)
        .map_err(|err| err.to_string())
}

/// A JSON value whose objects have no duplicated key.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Number::from_f64(value)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element::<Strict>()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "the key `{key}` appears twice in one object"
                )));
            }
            let Strict(value) = map.next_value::<Strict>()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_json_and_refuses_what_parsers_read_differently() {
        assert_eq!(
            parse(br#"{"a": [1, -2, 2.5, "x", null, true, {"b": {}}]}"#),
            Ok(serde_json::json!({"a": [1, -2, 2.5, "x", null, true, {"b": {}}]}))
        );
        let twice = parse(br#"{"a": {"b": 1, "b": 2}}"#).unwrap_err();
        assert!(twice.contains("`b` appears twice"), "{twice}");
        assert!(parse(br#"{"a": "\ud800"}"#).is_err());
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(parse(deep.as_bytes()).is_err());
        assert!(parse(b"{} x").is_err());
    }
}

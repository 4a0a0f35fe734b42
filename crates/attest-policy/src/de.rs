//! Deserialization helpers that check values *while* serde_yaml reads them.
//!
//! serde_yaml pins an error on the YAML node being read when the error is raised,
//! so every check here runs inside a visitor: a bad regex is reported at the regex,
//! a bad rule at the rule, never at the top of the file.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// A value written as one YAML scalar and checked as it is read.
pub(crate) trait Word: Sized {
    /// What the value should look like, for "invalid type" messages.
    const EXPECTING: &'static str;

    /// Parses and checks the scalar's text.
    fn from_word(word: &str) -> Result<Self, String>;
}

/// Deserializes any [`Word`] from a scalar.
#[derive(Debug, Clone)]
pub(crate) struct W<T>(pub(crate) T);

impl<'de, T: Word> Deserialize<'de> for W<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_str(WordVisitor(PhantomData))
            .map(W)
    }
}

struct WordVisitor<T>(PhantomData<T>);

impl<T: Word> Visitor<'_> for WordVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        T::from_word(v).map_err(E::custom)
    }
}

/// A plain string that must not be empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Text(pub(crate) String);

impl Word for Text {
    const EXPECTING: &'static str = "a non-empty string";

    fn from_word(word: &str) -> Result<Self, String> {
        if word.trim().is_empty() {
            return Err("empty string".to_owned());
        }
        Ok(Text(word.trim().to_owned()))
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        W::<Text>::deserialize(deserializer).map(|W(text)| text)
    }
}

/// One value or a non-empty list of values: `verb: send` or `verb: [send, reply]`.
///
/// An empty list is an error unless `EMPTY_OK`: in a match, "any of nothing" never
/// matches, which is never what the author meant. Configuration lists (domains, org
/// lists) may be empty.
#[derive(Debug, Clone)]
pub(crate) struct OneOrMany<T, const EMPTY_OK: bool = false>(pub(crate) Vec<T>);

/// A list that may be empty (or a single value).
pub(crate) type List<T> = OneOrMany<T, true>;

impl<T, const EMPTY_OK: bool> Default for OneOrMany<T, EMPTY_OK> {
    fn default() -> Self {
        OneOrMany(Vec::new())
    }
}

impl<'de, T: Word, const EMPTY_OK: bool> Deserialize<'de> for OneOrMany<T, EMPTY_OK> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(OneOrManyVisitor::<T, EMPTY_OK>(PhantomData))
            .map(OneOrMany)
    }
}

struct OneOrManyVisitor<T, const EMPTY_OK: bool>(PhantomData<T>);

impl<'de, T: Word, const EMPTY_OK: bool> Visitor<'de> for OneOrManyVisitor<T, EMPTY_OK> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} or a list of them", T::EXPECTING)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<T>, E> {
        T::from_word(v).map(|one| vec![one]).map_err(E::custom)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Vec<T>, E> {
        self.visit_str(if v { "true" } else { "false" })
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Vec<T>, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Vec<T>, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Vec<T>, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut items = Vec::new();
        while let Some(W(item)) = seq.next_element::<W<T>>()? {
            items.push(item);
        }
        if items.is_empty() && !EMPTY_OK {
            return Err(de::Error::custom("empty list (write at least one value)"));
        }
        Ok(items)
    }
}

/// A key of an [`OrderedMap`]: a [`Word`] with a text to detect duplicates by.
pub(crate) trait Key: Word {
    /// The text duplicates are compared by (case-insensitively).
    fn key_text(&self) -> &str;
}

/// A YAML mapping kept in file order, with checked keys and no duplicate keys.
#[derive(Debug, Clone)]
pub(crate) struct OrderedMap<K, V>(pub(crate) Vec<(K, V)>);

impl<K, V> Default for OrderedMap<K, V> {
    fn default() -> Self {
        OrderedMap(Vec::new())
    }
}

impl<'de, K: Key, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<K, V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_map(OrderedMapVisitor(PhantomData))
            .map(OrderedMap)
    }
}

struct OrderedMapVisitor<K, V>(PhantomData<(K, V)>);

impl<'de, K: Key, V: Deserialize<'de>> Visitor<'de> for OrderedMapVisitor<K, V> {
    type Value = Vec<(K, V)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a mapping whose keys are {}", K::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries: Vec<(K, V)> = Vec::new();
        while let Some(key) = map.next_key_seed(KeySeed::<K, V> {
            seen: &entries,
            marker: PhantomData,
        })? {
            let value = map.next_value::<V>()?;
            entries.push((key, value));
        }
        Ok(entries)
    }
}

/// Reads one key and rejects it, at the key, when an earlier key has the same text.
struct KeySeed<'a, K, V> {
    seen: &'a [(K, V)],
    marker: PhantomData<K>,
}

impl<'de, K: Key, V> DeserializeSeed<'de> for KeySeed<'_, K, V> {
    type Value = K;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<K, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<K: Key, V> Visitor<'_> for KeySeed<'_, K, V> {
    type Value = K;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(K::EXPECTING)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<K, E> {
        let key = K::from_word(v).map_err(E::custom)?;
        if self
            .seen
            .iter()
            .any(|(other, _)| other.key_text().eq_ignore_ascii_case(key.key_text()))
        {
            return Err(E::custom(format!("duplicate key {:?}", key.key_text())));
        }
        Ok(key)
    }
}

/// Deserializes a mapping with `R`'s derived `Deserialize` and then checks it with
/// `check`, inside the mapping's visitor so that a failed check is reported at the
/// mapping's line.
pub fn checked_map<'de, D, R, T>(
    deserializer: D,
    expecting: &'static str,
    check: fn(R) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    R: Deserialize<'de>,
{
    deserializer.deserialize_map(CheckedVisitor {
        expecting,
        check,
        marker: PhantomData,
    })
}

struct CheckedVisitor<R, T> {
    expecting: &'static str,
    check: fn(R) -> Result<T, String>,
    marker: PhantomData<R>,
}

impl<'de, R: Deserialize<'de>, T> Visitor<'de> for CheckedVisitor<R, T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        let raw = R::deserialize(de::value::MapAccessDeserializer::new(map))?;
        (self.check)(raw).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Upper(String);

    impl Word for Upper {
        const EXPECTING: &'static str = "an upper-case word";
        fn from_word(word: &str) -> Result<Self, String> {
            if word.chars().all(|c| c.is_ascii_uppercase()) {
                Ok(Upper(word.to_owned()))
            } else {
                Err(format!("{word:?} is not upper case"))
            }
        }
    }

    impl Key for Upper {
        fn key_text(&self) -> &str {
            &self.0
        }
    }

    #[test]
    fn word_errors_point_at_the_scalar() {
        let err = serde_yaml::from_str::<Vec<W<Upper>>>("- A\n- B\n- c\n").unwrap_err();
        let at = err.location().unwrap();
        assert_eq!((at.line(), at.column()), (3, 3));
        assert!(err.to_string().contains("\"c\" is not upper case"), "{err}");
    }

    #[test]
    fn one_or_many_takes_a_scalar_or_a_non_empty_list() {
        let one: OneOrMany<Upper> = serde_yaml::from_str("A").unwrap();
        assert_eq!(one.0.len(), 1);
        let many: OneOrMany<Upper> = serde_yaml::from_str("[A, B]").unwrap();
        assert_eq!(many.0.len(), 2);
        assert!(serde_yaml::from_str::<OneOrMany<Upper>>("[]").is_err());
        assert!(serde_yaml::from_str::<OneOrMany<Upper>>("~").is_err());
        assert!(serde_yaml::from_str::<OneOrMany<Upper>>("{A: B}").is_err());
        assert!(serde_yaml::from_str::<List<Upper>>("[]")
            .unwrap()
            .0
            .is_empty());
    }

    #[test]
    fn ordered_maps_keep_order_and_reject_duplicates_at_the_key() {
        let map: OrderedMap<Upper, u32> = serde_yaml::from_str("B: 1\nA: 2\n").unwrap();
        let keys: Vec<&str> = map.0.iter().map(|(k, _)| k.0.as_str()).collect();
        assert_eq!(keys, ["B", "A"]);
        let err = serde_yaml::from_str::<OrderedMap<Upper, u32>>("A: 1\nB: 2\nA: 3\n").unwrap_err();
        assert_eq!(err.location().unwrap().line(), 3);
        assert!(err.to_string().contains("duplicate key"), "{err}");
    }
}

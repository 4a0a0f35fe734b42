//! How a rule that asks is approved: by whom and how many (`approvers`), and what
//! happens while nobody answers (`remind_after`, `escalate_after` with `escalate_to`,
//! `expire_after`).
//!
//! ```yaml
//! approvers: [ann@acme.com, finance]          # any one of them
//! approvers: {from: [finance], count: 2}       # two distinct members of finance
//! approvers: {each: [finance, legal]}          # one from finance and one from legal
//! approvers: {from: [finance], count: 2, reject: 2}  # two rejections end it (default 1)
//! ```

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::de::{OneOrMany, Text, Word, W};

/// A quorum: how many distinct people must approve, and how many rejections end the
/// request. On a verdict only when the rule wrote the `{from, count}` or `{each}` form.
///
/// The actor who asked and the owner of the connection the action uses never count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quorum {
    /// Approvals needed, from distinct people.
    pub need: u32,
    /// For the `each` form: the groups (or people), each contributing one approval,
    /// with their members resolved. Empty for the `from` form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub each: Vec<QuorumGroup>,
    /// Rejections that end the request (1: the first).
    pub reject: u32,
}

/// One group of an `each` quorum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumGroup {
    /// The group's (or person's) name as the rule wrote it.
    pub name: String,
    /// Its members.
    pub members: Vec<String>,
}

impl Quorum {
    /// How many of `approvers` (distinct people, each an eligible member) count towards
    /// the quorum: for the `from` form, all of them; for the `each` form, as many groups
    /// as can be given a different approver each (`wildcards`, people escalated to, fit
    /// any group).
    pub fn have(&self, approvers: &[String], wildcards: &[String]) -> u32 {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        if self.each.is_empty() {
            return count(approvers.len());
        }
        // A small bipartite matching (Kuhn's): groups on one side, approvers on the other.
        let fits = |person: &str, group: &QuorumGroup| {
            wildcards.iter().any(|w| w.eq_ignore_ascii_case(person))
                || group.members.iter().any(|m| m.eq_ignore_ascii_case(person))
        };
        let mut holder: Vec<Option<usize>> = vec![None; approvers.len()];
        let mut matched = 0;
        for group in 0..self.each.len() {
            let mut seen = vec![false; approvers.len()];
            if self.augment(group, approvers, &fits, &mut holder, &mut seen) {
                matched += 1;
            }
        }
        count(matched)
    }

    fn augment(
        &self,
        group: usize,
        approvers: &[String],
        fits: &dyn Fn(&str, &QuorumGroup) -> bool,
        holder: &mut [Option<usize>],
        seen: &mut [bool],
    ) -> bool {
        for (person, name) in approvers.iter().enumerate() {
            if seen[person] || !fits(name, &self.each[group]) {
                continue;
            }
            seen[person] = true;
            let free = match holder[person] {
                None => true,
                Some(other) => self.augment(other, approvers, fits, holder, seen),
            };
            if free {
                holder[person] = Some(group);
                return true;
            }
        }
        false
    }

    /// The groups of an `each` quorum no approver in `approvers` has covered yet, by
    /// name (for "waiting for legal"); for the `from` form, empty.
    pub fn waiting_for(&self, approvers: &[String], wildcards: &[String]) -> Vec<String> {
        (0..self.each.len())
            .filter(|&i| {
                let mut without = self.clone();
                without.each.remove(i);
                without.have(approvers, wildcards) == self.have(approvers, wildcards)
            })
            .map(|i| self.each[i].name.clone())
            .collect()
    }
}

/// What a rule says about a request nobody answers, on the verdict: each step fires once.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Escalation {
    /// Tell the approvers again after this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_after: Option<u64>,
    /// Tell `escalate_to` after this many seconds; they may then decide too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_after: Option<u64>,
    /// Who is escalated to: people or groups, as the rule wrote them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalate_to: Vec<String>,
    /// `escalate_to` with groups resolved to their members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalate_members: Vec<String>,
    /// Reject the request as expired after this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<u64>,
}

impl Escalation {
    /// True when the rule set none of the steps.
    pub fn is_empty(&self) -> bool {
        self.remind_after.is_none() && self.escalate_after.is_none() && self.expire_after.is_none()
    }
}

/// `approvers:` as written: a list (any one of them), or a quorum.
#[derive(Debug, Clone, Default)]
pub(crate) struct ApproversSpec {
    /// The people or groups who may approve (`from`, or `each`'s groups).
    pub(crate) names: Vec<String>,
    /// The quorum, for the map forms.
    pub(crate) quorum: Option<RawQuorumCheck>,
}

/// A checked `{from, count, reject}` or `{each, reject}`, its groups not yet resolved.
#[derive(Debug, Clone)]
pub(crate) struct RawQuorumCheck {
    pub(crate) count: u32,
    pub(crate) each: bool,
    pub(crate) reject: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuorum {
    #[serde(default)]
    from: Option<OneOrMany<Text>>,
    #[serde(default)]
    count: Option<u32>,
    #[serde(default)]
    each: Option<OneOrMany<Text>>,
    #[serde(default)]
    reject: Option<u32>,
}

impl RawQuorum {
    fn check(self) -> Result<ApproversSpec, String> {
        let reject = self.reject.unwrap_or(1);
        if reject == 0 {
            return Err("approvers.reject must be at least 1".to_owned());
        }
        let texts = |list: OneOrMany<Text>| list.0.into_iter().map(|Text(t)| t).collect();
        match (self.from, self.each) {
            (Some(_), Some(_)) => Err(
                "approvers: write either `from` with `count` or `each`, not both".to_owned(),
            ),
            (None, None) => Err(
                "approvers: a quorum needs `from: [groups or people]` with `count: N`, or `each: [groups]`"
                    .to_owned(),
            ),
            (Some(from), None) => {
                let count = self.count.unwrap_or(1);
                if count == 0 {
                    return Err("approvers.count must be at least 1".to_owned());
                }
                Ok(ApproversSpec {
                    names: texts(from),
                    quorum: Some(RawQuorumCheck {
                        count,
                        each: false,
                        reject,
                    }),
                })
            }
            (None, Some(each)) => {
                if self.count.is_some() {
                    return Err(
                        "approvers: `count` goes with `from`; with `each`, every group gives one approval"
                            .to_owned(),
                    );
                }
                let names: Vec<String> = texts(each);
                Ok(ApproversSpec {
                    quorum: Some(RawQuorumCheck {
                        count: u32::try_from(names.len()).unwrap_or(u32::MAX),
                        each: true,
                        reject,
                    }),
                    names,
                })
            }
        }
    }
}

impl<'de> Deserialize<'de> for ApproversSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SpecVisitor)
    }
}

struct SpecVisitor;

impl<'de> Visitor<'de> for SpecVisitor {
    type Value = ApproversSpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a person or group, a list of them, or {from: [groups], count: N}")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<ApproversSpec, E> {
        let Text(name) = Text::from_word(v).map_err(E::custom)?;
        Ok(ApproversSpec {
            names: vec![name],
            quorum: None,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ApproversSpec, A::Error> {
        let mut names = Vec::new();
        while let Some(W(Text(name))) = seq.next_element::<W<Text>>()? {
            names.push(name);
        }
        if names.is_empty() {
            return Err(de::Error::custom("empty list (write at least one value)"));
        }
        Ok(ApproversSpec {
            names,
            quorum: None,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ApproversSpec, A::Error> {
        let raw = RawQuorum::deserialize(de::value::MapAccessDeserializer::new(map))?;
        raw.check().map_err(de::Error::custom)
    }
}

/// A wait such as `30m`, `4h` or `2d`: positive, at least a second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wait(pub(crate) Duration);

impl Word for Wait {
    const EXPECTING: &'static str = "a length of time such as 30m, 4h or 2d";

    fn from_word(word: &str) -> Result<Self, String> {
        crate::limit::positive_duration(word, "wait").map(Wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(name: &str, members: &[&str]) -> QuorumGroup {
        QuorumGroup {
            name: name.into(),
            members: members.iter().map(|m| (*m).to_owned()).collect(),
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|m| (*m).to_owned()).collect()
    }

    #[test]
    fn each_group_takes_a_different_person() {
        let quorum = Quorum {
            need: 2,
            each: vec![
                group("finance", &["ann", "bob"]),
                group("legal", &["bob", "cat"]),
            ],
            reject: 1,
        };
        // Bob is in both groups, but one person fills one place.
        assert_eq!(quorum.have(&names(&["bob"]), &[]), 1);
        assert_eq!(quorum.waiting_for(&names(&["bob"]), &[]).len(), 2);
        // Bob must move to legal for Ann to fill finance.
        assert_eq!(quorum.have(&names(&["bob", "ann"]), &[]), 2);
        assert_eq!(quorum.have(&names(&["ann", "dan"]), &[]), 1);
        assert_eq!(quorum.waiting_for(&names(&["ann"]), &[]), ["legal"]);
        // Someone escalated to fits any group.
        assert_eq!(quorum.have(&names(&["ann", "cfo"]), &names(&["cfo"])), 2);
    }

    #[test]
    fn the_forms_are_checked() {
        let spec = |yaml: &str| serde_yaml::from_str::<ApproversSpec>(yaml);
        let from = spec("{from: [finance], count: 2}").unwrap();
        assert_eq!(from.names, ["finance"]);
        assert_eq!(
            from.quorum.as_ref().map(|q| (q.count, q.each)),
            Some((2, false))
        );
        let each = spec("{each: [finance, legal], reject: 2}").unwrap();
        assert_eq!(
            each.quorum.map(|q| (q.count, q.each, q.reject)),
            Some((2, true, 2))
        );
        assert!(spec("[ann, finance]").unwrap().quorum.is_none());
        for (bad, says) in [
            ("{from: [a], count: 0}", "at least 1"),
            ("{from: [a], each: [b]}", "not both"),
            ("{count: 2}", "a quorum needs"),
            ("{each: [a], count: 2}", "`count` goes with `from`"),
            ("{from: [a], cuont: 2}", "unknown field `cuont`"),
            ("{from: [a], reject: 0}", "reject must be at least 1"),
            ("[]", "empty list"),
        ] {
            let err = spec(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}

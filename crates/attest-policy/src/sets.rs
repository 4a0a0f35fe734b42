//! Small sets of verbs, risk tiers and target classes, as bit masks: a match key such
//! as `verb: [send, reply]` is one AND at evaluation time.

use crate::de::Word;
use crate::glob::Glob;
use crate::{Risk, TargetClass, Verb};

/// A set of verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VerbSet(u16);

impl VerbSet {
    /// Every verb.
    pub(crate) const ALL: VerbSet = VerbSet((1 << Verb::ALL.len()) - 1);

    /// The verbs a glob such as `send`, `re*` or `*` names; an error when it names none.
    pub(crate) fn from_glob(word: &str) -> Result<VerbSet, String> {
        let glob = Glob::new(word).map_err(|e| format!("verb: {e}"))?;
        let set = Verb::ALL
            .into_iter()
            .filter(|verb| glob.matches(verb.as_str()))
            .fold(VerbSet(0), |set, verb| set.with(verb));
        if set.0 == 0 {
            return Err(format!(
                "unknown verb {:?} (expected one of: {})",
                glob.as_str(),
                Verb::ALL.map(Verb::as_str).join(", ")
            ));
        }
        Ok(set)
    }

    /// The union of two sets.
    pub(crate) fn union(self, other: VerbSet) -> VerbSet {
        VerbSet(self.0 | other.0)
    }

    fn with(self, verb: Verb) -> VerbSet {
        VerbSet(self.0 | bit(verb as usize))
    }

    /// Whether `verb` is in the set.
    pub(crate) fn contains(self, verb: Verb) -> bool {
        self.0 & bit(verb as usize) != 0
    }
}

/// A set of risk tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RiskSet(u8);

impl RiskSet {
    /// Every tier.
    pub(crate) const ALL: RiskSet = RiskSet(0b1111);

    /// The set holding `risk`.
    pub(crate) fn one(risk: Risk) -> RiskSet {
        RiskSet(bit(risk as usize) as u8)
    }

    /// The union of two sets.
    pub(crate) fn union(self, other: RiskSet) -> RiskSet {
        RiskSet(self.0 | other.0)
    }

    /// Whether `risk` is in the set.
    pub(crate) fn contains(self, risk: Risk) -> bool {
        self.0 & bit(risk as usize) as u8 != 0
    }
}

/// A set of target classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ClassSet(u8);

impl ClassSet {
    /// Every class.
    pub(crate) const ALL: ClassSet = ClassSet(0b1111);

    /// The set holding `class`.
    pub(crate) fn one(class: TargetClass) -> ClassSet {
        ClassSet(bit(class as usize) as u8)
    }

    /// The union of two sets.
    pub(crate) fn union(self, other: ClassSet) -> ClassSet {
        ClassSet(self.0 | other.0)
    }

    /// Whether `class` is in the set.
    pub(crate) fn contains(self, class: TargetClass) -> bool {
        self.0 & bit(class as usize) as u8 != 0
    }
}

impl Word for VerbSet {
    const EXPECTING: &'static str = "a verb such as send (or a pattern such as re*)";

    fn from_word(word: &str) -> Result<Self, String> {
        VerbSet::from_glob(word)
    }
}

impl Word for Verb {
    const EXPECTING: &'static str = "a verb such as send";

    fn from_word(word: &str) -> Result<Self, String> {
        word.parse().map_err(|e: crate::PolicyError| e.to_string())
    }
}

impl Word for Risk {
    const EXPECTING: &'static str = "a risk tier: low, medium, high or very_high";

    fn from_word(word: &str) -> Result<Self, String> {
        word.parse().map_err(|e: crate::PolicyError| e.to_string())
    }
}

impl Word for TargetClass {
    const EXPECTING: &'static str = "a target class: none, internal, known or external";

    fn from_word(word: &str) -> Result<Self, String> {
        match word.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(TargetClass::None),
            "internal" => Ok(TargetClass::Internal),
            "known" => Ok(TargetClass::Known),
            "external" => Ok(TargetClass::External),
            _ => Err(format!(
                "unknown target class {:?} (expected none, internal, known or external)",
                word.trim()
            )),
        }
    }
}

fn bit(index: usize) -> u16 {
    1u16 << index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verb_globs_expand_to_verbs() {
        let re = VerbSet::from_glob("re*").unwrap();
        assert!(re.contains(Verb::Read) && re.contains(Verb::Reply));
        assert!(!re.contains(Verb::Send));
        let all = VerbSet::from_glob("*").unwrap();
        assert!(Verb::ALL.into_iter().all(|v| all.contains(v)));
        assert_eq!(all, VerbSet::ALL);
        assert!(VerbSet::from_glob("SEND").unwrap().contains(Verb::Send));
        let err = VerbSet::from_glob("frob*").unwrap_err();
        assert!(err.starts_with("unknown verb \"frob*\""), "{err}");
    }

    #[test]
    fn risk_and_class_sets() {
        let high = RiskSet::one(Risk::High).union(RiskSet::one(Risk::VeryHigh));
        assert!(high.contains(Risk::VeryHigh) && !high.contains(Risk::Low));
        let ext = ClassSet::one(TargetClass::External);
        assert!(ext.contains(TargetClass::External) && !ext.contains(TargetClass::None));
        for class in [
            TargetClass::None,
            TargetClass::Internal,
            TargetClass::Known,
            TargetClass::External,
        ] {
            assert!(ClassSet::ALL.contains(class));
        }
        for risk in [Risk::Low, Risk::Medium, Risk::High, Risk::VeryHigh] {
            assert!(RiskSet::ALL.contains(risk));
        }
    }
}

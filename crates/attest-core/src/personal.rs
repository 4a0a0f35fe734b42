//! Personal fields (the configuration's `personal:`): which fields of a row are sealed
//! under the key of the person they are about, and how that person, the subject, is
//! found. The sealing itself, the keys and erasure are the ledger's
//! ([`attest_ledger::Ledger::seal`], [`attest_ledger::Ledger::erase`]).

use attest_ledger::{Ledger, LedgerError, Record};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The fields sealed when the configuration names none: the target and the preview
/// fields that hold e-mail addresses, names and phone numbers.
pub const DEFAULT_FIELDS: &[&str] = &[
    "target",
    "to",
    "cc",
    "bcc",
    "from",
    "recipient",
    "recipients",
    "email",
    "name",
    "first_name",
    "last_name",
    "phone",
    "phone_number",
    "customer_id",
];

/// `personal:` in the configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PersonalSettings {
    /// Where a row's subject is read, the first one present wins: `target`, or
    /// `param:NAME` (a field of the row's params preview; `NAME` must be one the preview
    /// keeps, such as `to`, `email` or a name ending in `_id`). A row with none of them
    /// has no subject and is written unsealed.
    pub subject: Vec<SubjectRule>,
    /// The fields sealed: `target`, or names in the params preview [default:
    /// [`DEFAULT_FIELDS`]].
    #[serde(default = "default_fields")]
    pub fields: Vec<String>,
}

/// Where a row's subject is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum SubjectRule {
    /// The row's target.
    Target,
    /// A field of the row's params preview (its first string, for a list).
    Param(String),
}

impl TryFrom<String> for SubjectRule {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        if text == "target" {
            return Ok(SubjectRule::Target);
        }
        match text.strip_prefix("param:") {
            Some(name) if !name.is_empty() => Ok(SubjectRule::Param(name.to_owned())),
            _ => Err(format!(
                "personal.subject: {text:?} is neither `target` nor `param:NAME`"
            )),
        }
    }
}

impl From<SubjectRule> for String {
    fn from(rule: SubjectRule) -> String {
        match rule {
            SubjectRule::Target => "target".to_owned(),
            SubjectRule::Param(name) => format!("param:{name}"),
        }
    }
}

fn default_fields() -> Vec<String> {
    DEFAULT_FIELDS.iter().map(|f| (*f).to_owned()).collect()
}

impl PersonalSettings {
    /// Settings reading the subject by `subject`'s rules, sealing the default fields.
    pub fn new(subject: Vec<SubjectRule>) -> PersonalSettings {
        PersonalSettings {
            subject,
            fields: default_fields(),
        }
    }

    /// The row's subject, as recorded (before sealing).
    fn subject_of(&self, record: &Record) -> Option<String> {
        self.subject.iter().find_map(|rule| {
            let text = match rule {
                SubjectRule::Target => record.target.clone(),
                SubjectRule::Param(name) => match record.params_preview.get(name) {
                    Some(Value::String(text)) => Some(text.clone()),
                    Some(Value::Array(items)) => {
                        items.iter().find_map(|v| v.as_str().map(str::to_owned))
                    }
                    Some(Value::Number(n)) => Some(n.to_string()),
                    _ => None,
                },
            }?;
            (!text.trim().is_empty()).then_some(text)
        })
    }

    /// Seals `record`'s personal fields under its subject's key (a record with no
    /// subject, or sealed already, is left as it is). An error means the record must not
    /// be written: the action does not run.
    pub(crate) fn seal(&self, ledger: &Ledger, record: &mut Record) -> Result<(), LedgerError> {
        if record.sealed.is_some() {
            return Ok(());
        }
        match self.subject_of(record) {
            Some(subject) => ledger.seal(record, &subject, &self.fields),
            None => Ok(()),
        }
    }
}

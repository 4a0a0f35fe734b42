//! `calendars:`: named windows of local time that `when:` conditions read as
//! `calendar.NAME` (true while the call's time is inside).
//!
//! ```yaml
//! calendars:
//!   office_hours: {zone: Europe/Berlin, days: [mon, tue, wed, thu, fri], hours: "09:00-17:00"}
//!   friday_afternoon: {zone: Europe/Berlin, days: [fri], hours: "16:00-24:00"}
//!   year_end_freeze: {zone: Europe/Berlin, dates: ["2026-12-20..2027-01-06"]}
//! ```
//!
//! A time is inside a window when each key written holds: its weekday (in the zone) is
//! one of `days`, its local time of day is in `hours` (from inclusive, to exclusive;
//! `24:00` is the end of the day), its local date is in one of the `dates` ranges (both
//! ends inclusive). The zone is an IANA name, so summer time is the zone's own.

use chrono::{DateTime, NaiveDate, NaiveTime, Timelike, Utc, Weekday};
use chrono_tz::Tz;
use serde::de::Deserializer;
use serde::Deserialize;

use crate::de::{checked_map, Key, OrderedMap, Word};

/// Every calendar of a policy, by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Calendars(Vec<(String, Window)>);

impl Calendars {
    /// The calendars in file order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(String, Window)> {
        self.0.iter()
    }

    /// Whether a calendar of that name exists.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| n == name)
    }

    /// The section as read.
    pub(crate) fn from_section(section: OrderedMap<CalendarName, Window>) -> Calendars {
        Calendars(section.0.into_iter().map(|(k, v)| (k.0, v)).collect())
    }
}

/// A calendar's name: a CEL identifier, so `calendar.NAME` reads it.
#[derive(Debug, Clone)]
pub(crate) struct CalendarName(pub(crate) String);

impl Word for CalendarName {
    const EXPECTING: &'static str = "a calendar name such as office_hours";

    fn from_word(word: &str) -> Result<Self, String> {
        let name = word.trim();
        let mut chars = name.chars();
        let ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if ok {
            Ok(CalendarName(name.to_owned()))
        } else {
            Err(format!(
                "calendar name {name:?} must be letters, digits and _ (it is read as calendar.{name})"
            ))
        }
    }
}

impl Key for CalendarName {
    fn key_text(&self) -> &str {
        &self.0
    }
}

/// One window.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    zone: Tz,
    days: Option<Vec<Weekday>>,
    /// Seconds since local midnight: from (inclusive), to (exclusive).
    hours: Option<(u32, u32)>,
    dates: Vec<(NaiveDate, NaiveDate)>,
}

impl Window {
    /// Whether `at` is inside the window.
    pub(crate) fn contains(&self, at: DateTime<Utc>) -> bool {
        let local = at.with_timezone(&self.zone);
        let date = local.date_naive();
        let second = local.time().num_seconds_from_midnight();
        self.days
            .as_ref()
            .is_none_or(|days| days.contains(&chrono::Datelike::weekday(&date)))
            && self
                .hours
                .is_none_or(|(from, to)| second >= from && second < to)
            && (self.dates.is_empty()
                || self
                    .dates
                    .iter()
                    .any(|(first, last)| date >= *first && date <= *last))
    }

    fn check(raw: RawWindow) -> Result<Window, String> {
        let zone: Tz = raw.zone.trim().parse().map_err(|_| {
            format!(
                "unknown time zone {:?} (an IANA name such as Europe/Berlin)",
                raw.zone
            )
        })?;
        let days = raw
            .days
            .map(|days| {
                days.iter()
                    .map(|d| weekday(d))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let hours = raw.hours.as_deref().map(hours).transpose()?;
        let dates = raw
            .dates
            .unwrap_or_default()
            .iter()
            .map(|range| date_range(range))
            .collect::<Result<Vec<_>, _>>()?;
        if days.is_none() && hours.is_none() && dates.is_empty() {
            return Err("a calendar needs days, hours or dates".to_owned());
        }
        Ok(Window {
            zone,
            days,
            hours,
            dates,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWindow {
    zone: String,
    #[serde(default)]
    days: Option<Vec<String>>,
    #[serde(default)]
    hours: Option<String>,
    #[serde(default)]
    dates: Option<Vec<String>>,
}

impl<'de> Deserialize<'de> for Window {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map(
            deserializer,
            "a calendar such as {zone: Europe/Berlin, days: [mon], hours: \"09:00-17:00\"}",
            Window::check,
        )
    }
}

fn weekday(word: &str) -> Result<Weekday, String> {
    word.trim()
        .parse::<Weekday>()
        .map_err(|_| format!("unknown weekday {word:?} (mon, tue, wed, thu, fri, sat, sun)"))
}

/// `HH:MM-HH:MM` as seconds since midnight; `24:00` ends the day.
fn hours(text: &str) -> Result<(u32, u32), String> {
    let bad = || format!("hours {text:?} must be HH:MM-HH:MM, such as 09:00-17:00");
    let (from, to) = text.split_once('-').ok_or_else(bad)?;
    let clock = |part: &str| -> Result<u32, String> {
        let part = part.trim();
        if part == "24:00" {
            return Ok(24 * 3600);
        }
        NaiveTime::parse_from_str(part, "%H:%M")
            .map(|t| t.num_seconds_from_midnight())
            .map_err(|_| bad())
    };
    let (from, to) = (clock(from)?, clock(to)?);
    if from >= to {
        return Err(format!(
            "hours {text:?}: the start must come before the end (split a window that spans midnight in two calendars)"
        ));
    }
    Ok((from, to))
}

/// `YYYY-MM-DD..YYYY-MM-DD`, or one date.
fn date_range(text: &str) -> Result<(NaiveDate, NaiveDate), String> {
    let date = |part: &str| {
        NaiveDate::parse_from_str(part.trim(), "%Y-%m-%d")
            .map_err(|_| format!("dates {text:?} must be YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD"))
    };
    let (first, last) = match text.split_once("..") {
        Some((first, last)) => (date(first)?, date(last)?),
        None => (date(text)?, date(text)?),
    };
    if first > last {
        return Err(format!(
            "dates {text:?}: the first date comes after the last"
        ));
    }
    Ok((first, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(yaml: &str) -> Window {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    #[test]
    fn office_hours_follow_berlin_across_the_dst_change() {
        let office = window(
            "{zone: Europe/Berlin, days: [mon, tue, wed, thu, fri], hours: \"09:00-17:00\"}",
        );
        // Friday 2026-03-27, winter time (UTC+1): 08:30 UTC is 09:30 in Berlin.
        assert!(office.contains(at("2026-03-27T08:30:00Z")));
        assert!(!office.contains(at("2026-03-27T07:30:00Z")));
        // Summer time from Sunday 2026-03-29 (UTC+2): on Monday 07:30 UTC is 09:30 in
        // Berlin, inside; 15:30 UTC is 17:30, outside (it was inside the week before).
        assert!(office.contains(at("2026-03-30T07:30:00Z")));
        assert!(!office.contains(at("2026-03-30T15:30:00Z")));
        assert!(office.contains(at("2026-03-27T15:30:00Z")));
        // The weekend, at noon.
        assert!(!office.contains(at("2026-03-28T11:00:00Z")));
        // Back to winter time on 2026-10-25: Monday 07:30 UTC is 08:30, outside.
        assert!(!office.contains(at("2026-10-26T07:30:00Z")));
        assert!(office.contains(at("2026-10-26T08:30:00Z")));
    }

    #[test]
    fn dates_and_mistakes() {
        let freeze = window("{zone: Europe/Berlin, dates: [\"2026-12-20..2027-01-06\"]}");
        // 23:30 UTC on 19 December is already the 20th in Berlin.
        assert!(freeze.contains(at("2026-12-19T23:30:00Z")));
        assert!(!freeze.contains(at("2026-12-19T22:30:00Z")));
        assert!(freeze.contains(at("2027-01-06T22:00:00Z")));
        assert!(!freeze.contains(at("2027-01-06T23:00:00Z")));
        let err = |yaml: &str| {
            serde_yaml::from_str::<Window>(yaml)
                .unwrap_err()
                .to_string()
        };
        assert!(err("{zone: Mars/Base, days: [mon]}").contains("unknown time zone"));
        assert!(err("{zone: UTC, days: [funday]}").contains("unknown weekday"));
        assert!(err("{zone: UTC, hours: \"17:00-09:00\"}").contains("before the end"));
        assert!(err("{zone: UTC}").contains("needs days, hours or dates"));
        assert!(err("{zone: UTC, days: [mon], weeks: 2}").contains("unknown field"));
    }
}

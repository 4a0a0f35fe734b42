//! Counts in words for people: "1 action", "2 actions".

/// `n` and `noun`, plural unless `n` is 1: "1 flag", "2 flags".
pub(crate) fn counted(n: u64, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        _ => format!("{n} {noun}s"),
    }
}

/// "1 action", "2 actions".
pub fn n_actions(n: u64) -> String {
    counted(n, "action")
}

//! `~` and environment variables in the paths a configuration file names.

use crate::verification::Env;

/// `raw` with a leading `~` (alone or before `/`) made `$HOME`, and each `$VAR` or
/// `${VAR}` made that variable's value. A `$` not followed by a name stays as it is.
/// Err: why not (an unset or empty variable is never read as an empty string).
pub(super) fn expand(raw: &str, env: &dyn Env) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    if let Some(after) = rest.strip_prefix('~') {
        if !(after.is_empty() || after.starts_with('/')) {
            return Err(format!(
                "{raw:?}: only ~ or ~/ is expanded (another user's home is not)"
            ));
        }
        let home = env.var("HOME").ok_or("~ needs $HOME, which is not set")?;
        out.push_str(&home);
        rest = after;
    }
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = match after.strip_prefix('{') {
            Some(braced) => {
                let end = braced
                    .find('}')
                    .ok_or_else(|| format!("{raw:?}: ${{ without a closing }}"))?;
                let name = &braced[..end];
                if !super::is_var_name(name) {
                    return Err(format!("{raw:?}: ${{{name}}} is not a variable name"));
                }
                (name, &braced[end + 1..])
            }
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        if !super::is_var_name(name) {
            out.push('$');
            rest = after;
            continue;
        }
        let value = env.var(name).ok_or_else(|| format!("${name} is not set"))?;
        out.push_str(&value);
        rest = tail;
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::expand;

    #[test]
    fn tilde_and_variables_expand_and_an_unset_one_is_an_error() {
        let env: HashMap<String, String> = [("HOME", "/home/ann"), ("DIR", "books")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let ok = |raw| expand(raw, &env).unwrap();
        assert_eq!(ok("~/books/a.sqlite"), "/home/ann/books/a.sqlite");
        assert_eq!(ok("~"), "/home/ann");
        assert_eq!(ok("$HOME/$DIR/x"), "/home/ann/books/x");
        assert_eq!(ok("${DIR}2/x"), "books2/x");
        assert_eq!(ok("a/~/b$"), "a/~/b$");
        assert_eq!(ok("cost-$5/x"), "cost-$5/x");
        assert_eq!(expand("${NOPE}/x", &env).unwrap_err(), "$NOPE is not set");
        assert!(expand("$NOPE", &env).is_err());
        assert!(expand("${DIR", &env).unwrap_err().contains("closing"));
        assert!(expand("${1x}", &env)
            .unwrap_err()
            .contains("not a variable"));
        assert!(expand("~bob/x", &env).unwrap_err().contains("another user"));
        let empty: HashMap<String, String> = HashMap::new();
        assert!(expand("~/x", &empty).unwrap_err().contains("HOME"));
    }
}

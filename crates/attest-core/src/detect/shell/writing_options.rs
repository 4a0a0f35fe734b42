//! Programs that read, save for an option or a program text that writes a file or runs
//! a command: `sort -o F`, `uniq IN OUT`, `sed -i`, `sed 's/x/y/w F'`, `sed e`,
//! `awk '… > "F"'`, `awk 'BEGIN{system(…)}'`, `gawk -i inplace`, `find -fprint F`,
//! `tree -o F`, `less -o F`, `sort --compress-program`, `rg --pre`. A written path is
//! judged as a shell redirection to it (`> F`) is; code that runs, or a program text this
//! reading cannot follow, is a command nobody knows.

/// What one option or program text does beyond reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Effect {
    /// It writes this file (empty when the name is computed at run time).
    Writes(String),
    /// It runs code this reading cannot judge.
    RunsCode,
}

/// What `program`'s options and program text do beyond reading (nothing for a program
/// this module does not cover).
pub(super) fn effects(program: &str, args: &[String]) -> Vec<Effect> {
    match program {
        "sort" => sort(args),
        "uniq" => uniq(args),
        "sed" => sed(args),
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => awk(args),
        "find" => find(args),
        "tree" => option_paths(args, &["-o"], &[]),
        "less" => option_paths(args, &["-o", "-O"], &["--log-file=", "--LOG-FILE="]),
        "rg" if args
            .iter()
            .any(|arg| arg == "--pre" || arg.starts_with("--pre=")) =>
        {
            vec![Effect::RunsCode]
        }
        _ => Vec::new(),
    }
}

/// The files named by `short` options (their value attached or the next word) and `long`
/// options (`--name=` forms).
fn option_paths(args: &[String], short: &[&str], long: &[&str]) -> Vec<Effect> {
    let mut out = Vec::new();
    for (at, arg) in args.iter().enumerate() {
        if let Some(path) = long.iter().find_map(|flag| arg.strip_prefix(flag)) {
            out.push(Effect::Writes(path.to_owned()));
        }
        for flag in short {
            if arg == flag {
                out.push(Effect::Writes(
                    args.get(at + 1).cloned().unwrap_or_default(),
                ));
            } else if let Some(path) = arg.strip_prefix(flag).filter(|p| !p.is_empty()) {
                out.push(Effect::Writes(path.to_owned()));
            }
        }
    }
    out
}

fn sort(args: &[String]) -> Vec<Effect> {
    let mut out = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            let value = || value.clone().or_else(|| rest.clone().next().cloned());
            match name {
                "output" => out.push(Effect::Writes(value().unwrap_or_default())),
                "compress-program" => out.push(Effect::RunsCode),
                _ => {}
            }
            continue;
        }
        let Some(short) = arg.strip_prefix('-') else {
            continue;
        };
        // A cluster of short options ends at the first that takes a value.
        for (i, flag) in short.char_indices() {
            if matches!(flag, 'k' | 't' | 'S' | 'T' | 'o') {
                let attached = &short[i + flag.len_utf8()..];
                let value = if attached.is_empty() {
                    rest.next().cloned().unwrap_or_default()
                } else {
                    attached.to_owned()
                };
                if flag == 'o' {
                    out.push(Effect::Writes(value));
                }
                break;
            }
        }
    }
    out
}

/// `uniq [OPTION]… [INPUT [OUTPUT]]`: the second operand is written.
fn uniq(args: &[String]) -> Vec<Effect> {
    let mut operands = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if matches!(arg.as_str(), "-f" | "-s" | "-w") {
            rest.next();
        } else if !arg.starts_with('-') || arg == "-" {
            operands.push(arg);
        }
    }
    operands
        .get(1)
        .map(|path| vec![Effect::Writes((*path).clone())])
        .unwrap_or_default()
}

fn sed(args: &[String]) -> Vec<Effect> {
    let mut out = Vec::new();
    let mut scripts = Vec::new();
    let mut operands = Vec::new();
    let mut in_place = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let arg = arg.as_str();
        if arg == "-e" || arg == "--expression" {
            scripts.extend(rest.next().cloned());
        } else if let Some(script) = arg.strip_prefix("--expression=") {
            scripts.push(script.to_owned());
        } else if arg == "-f" || arg == "--file" || arg.starts_with("--file=") {
            // A script in a file: a program this reading does not see.
            out.push(Effect::RunsCode);
        } else if arg == "-l" || arg == "--line-length" {
            rest.next();
        } else if arg.starts_with("--in-place") {
            in_place = true;
        } else if let Some(short) = arg.strip_prefix('-').filter(|s| !s.starts_with('-')) {
            if let Some(at) = short.find(['e', 'f', 'i']) {
                match &short[at..at + 1] {
                    // `-i` takes the rest of its word as a backup suffix.
                    "i" => in_place = true,
                    "e" => {
                        let attached = &short[at + 1..];
                        if attached.is_empty() {
                            scripts.extend(rest.next().cloned());
                        } else {
                            scripts.push(attached.to_owned());
                        }
                    }
                    _ => out.push(Effect::RunsCode),
                }
            }
        } else if !arg.starts_with("--") {
            operands.push(arg.to_owned());
        }
    }
    if scripts.is_empty() && !out.contains(&Effect::RunsCode) && !operands.is_empty() {
        scripts.push(operands.remove(0));
    }
    for script in &scripts {
        out.extend(sed_script(script));
    }
    if in_place {
        out.extend(operands.into_iter().map(Effect::Writes));
    }
    out
}

/// What a sed script does beyond printing: `w`/`W` and `s///w` write a file, `e` and
/// `s///e` run a command; a script this reading cannot follow runs code nobody read.
fn sed_script(script: &str) -> Vec<Effect> {
    let chars: Vec<char> = script.chars().collect();
    let mut out = Vec::new();
    let mut at = 0;
    let rest_of_line = |at: &mut usize| -> String {
        let start = *at;
        while *at < chars.len() && chars[*at] != '\n' {
            *at += 1;
        }
        chars[start..*at]
            .iter()
            .collect::<String>()
            .trim()
            .to_owned()
    };
    // Skips a delimited part (a regex, a replacement) from just past its opening
    // delimiter; false when it never closes.
    let skip_delimited = |at: &mut usize, delimiter: char| -> bool {
        while *at < chars.len() {
            match chars[*at] {
                '\\' => *at += 2,
                c if c == delimiter => {
                    *at += 1;
                    return true;
                }
                _ => *at += 1,
            }
        }
        false
    };
    loop {
        while at < chars.len() && (chars[at].is_whitespace() || matches!(chars[at], ';' | '}')) {
            at += 1;
        }
        let Some(&first) = chars.get(at) else {
            return out;
        };
        // The address: numbers, `$`, `/regex/`, `\cregexc`, ranges and steps, then `!`.
        let mut c = first;
        loop {
            if c.is_ascii_digit() || matches!(c, '$' | ',' | '~' | '+' | '!' | ' ') {
                at += 1;
            } else if c == '/' {
                at += 1;
                if !skip_delimited(&mut at, '/') {
                    return vec![Effect::RunsCode];
                }
            } else if c == '\\' {
                let Some(&delimiter) = chars.get(at + 1) else {
                    return vec![Effect::RunsCode];
                };
                at += 2;
                if !skip_delimited(&mut at, delimiter) {
                    return vec![Effect::RunsCode];
                }
            } else {
                break;
            }
            match chars.get(at) {
                Some(&next) => c = next,
                None => return out,
            }
        }
        at += 1;
        match c {
            '{' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z'
            | 'F' => {}
            'q' | 'Q' | 'l' | 'L' => {
                while at < chars.len() && chars[at].is_ascii_digit() {
                    at += 1;
                }
            }
            'w' | 'W' => out.push(Effect::Writes(rest_of_line(&mut at))),
            'r' | 'R' | 'a' | 'i' | 'c' => {
                rest_of_line(&mut at);
            }
            ':' | 'b' | 't' | 'T' | 'v' => {
                while at < chars.len() && !matches!(chars[at], ';' | '\n') {
                    at += 1;
                }
            }
            's' | 'y' => {
                let Some(&delimiter) = chars.get(at) else {
                    return vec![Effect::RunsCode];
                };
                at += 1;
                if !skip_delimited(&mut at, delimiter) || !skip_delimited(&mut at, delimiter) {
                    return vec![Effect::RunsCode];
                }
                if c == 's' {
                    while let Some(&flag) = chars.get(at) {
                        match flag {
                            'e' => {
                                out.push(Effect::RunsCode);
                                at += 1;
                            }
                            'w' => {
                                at += 1;
                                out.push(Effect::Writes(rest_of_line(&mut at)));
                            }
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' => at += 1,
                            f if f.is_ascii_digit() => at += 1,
                            _ => break,
                        }
                    }
                }
            }
            // `e` runs a command; anything else is a script this reading does not know.
            _ => return vec![Effect::RunsCode],
        }
    }
}

fn awk(args: &[String]) -> Vec<Effect> {
    let mut out = Vec::new();
    let mut program: Option<String> = None;
    let mut operands = Vec::new();
    let mut in_place = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let arg = arg.as_str();
        match arg {
            "-F" | "-v" | "--field-separator" | "--assign" => {
                rest.next();
            }
            "-f" | "--file" | "-E" | "--exec" | "-l" | "--load" => {
                rest.next();
                out.push(Effect::RunsCode);
            }
            "-e" | "--source" => program = rest.next().cloned(),
            "-i" | "--include" => {
                // gawk's `-i inplace` edits its files; any other library is code.
                if rest.next().map(String::as_str) == Some("inplace") {
                    in_place = true;
                } else {
                    out.push(Effect::RunsCode);
                }
            }
            "--" => {}
            _ if arg.starts_with("-f") || arg.starts_with("--file=") => {
                out.push(Effect::RunsCode);
            }
            _ if arg.starts_with("-i") => {
                if arg == "-iinplace" {
                    in_place = true;
                } else {
                    out.push(Effect::RunsCode);
                }
            }
            _ if arg.starts_with('-') && arg.len() > 1 => {}
            _ if program.is_none() && !out.contains(&Effect::RunsCode) => {
                program = Some(arg.to_owned());
            }
            _ => operands.push(arg.to_owned()),
        }
    }
    if let Some(program) = &program {
        out.extend(awk_program(program));
    }
    if in_place {
        out.extend(operands.into_iter().map(Effect::Writes));
    }
    out
}

/// What an awk program does beyond printing: `system(…)` and pipes (`print | "cmd"`,
/// `"cmd" | getline`) run commands; `print > "F"` and `>> "F"` write `F`; an output
/// redirection to a computed name writes a file nobody can name.
fn awk_program(program: &str) -> Vec<Effect> {
    let mut out = Vec::new();
    let code = program.replace("||", " ");
    if code.contains("system") || code.contains('|') {
        out.push(Effect::RunsCode);
    }
    let chars: Vec<char> = code.chars().collect();
    let mut at = 0;
    while at < chars.len() {
        match chars[at] {
            '"' => {
                // A string literal: its `>` is text.
                at += 1;
                while at < chars.len() && chars[at] != '"' {
                    at += if chars[at] == '\\' { 2 } else { 1 };
                }
                at += 1;
            }
            '>' if chars.get(at + 1) == Some(&'=') => at += 2,
            '>' => {
                at += 1;
                if chars.get(at) == Some(&'>') {
                    at += 1;
                }
                while chars.get(at).is_some_and(|c| *c == ' ' || *c == '\t') {
                    at += 1;
                }
                match chars.get(at) {
                    Some('"') => {
                        let start = at + 1;
                        let end = chars[start..]
                            .iter()
                            .position(|c| *c == '"')
                            .map_or(chars.len(), |len| start + len);
                        let path: String = chars[start..end].iter().collect();
                        if !path.starts_with("/dev/") {
                            out.push(Effect::Writes(path));
                        }
                        at = end + 1;
                    }
                    // A comparison with a number (`$1 > 5`).
                    Some(c) if c.is_ascii_digit() || *c == '-' || *c == '.' => {}
                    _ => out.push(Effect::Writes(String::new())),
                }
            }
            _ => at += 1,
        }
    }
    out
}

/// `find`'s file-writing actions: `-fprint F`, `-fprint0 F`, `-fls F`, `-fprintf F FMT`.
fn find(args: &[String]) -> Vec<Effect> {
    args.iter()
        .enumerate()
        .filter(|(_, arg)| matches!(arg.as_str(), "-fprint" | "-fprint0" | "-fls" | "-fprintf"))
        .map(|(at, _)| Effect::Writes(args.get(at + 1).cloned().unwrap_or_default()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writes(path: &str) -> Effect {
        Effect::Writes(path.to_owned())
    }

    #[test]
    fn sed_scripts() {
        assert_eq!(sed_script("s/a/b/g"), []);
        assert_eq!(sed_script("s/a/b/w out.txt"), [writes("out.txt")]);
        assert_eq!(sed_script("/x/,/y/ w out.txt\np"), [writes("out.txt")]);
        assert_eq!(sed_script("s|a/b|c|e"), [Effect::RunsCode]);
        assert_eq!(sed_script("1e date"), [Effect::RunsCode]);
        assert_eq!(sed_script("s/a/b"), [Effect::RunsCode]);
        assert_eq!(sed_script("1,5d;$!N;10q"), []);
        assert_eq!(sed_script("\\,x,d"), []);
    }

    #[test]
    fn awk_programs() {
        assert_eq!(awk_program("{ print > \"o.txt\" }"), [writes("o.txt")]);
        assert_eq!(awk_program("$1 > 5 { print \"a > b\" }"), []);
        assert_eq!(awk_program("$1 >= $2 || $3"), []);
        assert_eq!(awk_program("{ print > \"/dev/stderr\" }"), []);
        assert_eq!(awk_program("{ print > $2 }"), [writes("")]);
        assert_eq!(awk_program("BEGIN { system(\"x\") }"), [Effect::RunsCode]);
    }
}

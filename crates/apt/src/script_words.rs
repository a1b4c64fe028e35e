//! The simple commands of a maintainer script, read as data: each command's words with
//! quotes removed, for the fix-ups that do natively what a literal command line would
//! (`system_users`, `system_units`).
//!
//! A small reader, not a shell: lines joined at a trailing `\`, comments and here-documents
//! dropped, words split at blanks and at `;`, `&&`, `||`, `|`, `(`, `)` and `&`, redirections
//! dropped. A variable expands only where its value is known without running anything: one
//! assignment `NAME=literal` of its own in the script and no other, or `DPKG_ROOT` (empty: the
//! root is `/` in a normal install). Anything else (`$1`, `$(…)`, a backquote) leaves the word
//! [`Word::Unknown`], and the caller says it did not understand the line; it never guesses.
//! Must never run or evaluate anything.

use std::collections::BTreeMap;

/// One word of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word {
    /// Its value, quotes removed and known variables expanded.
    Literal(String),
    /// Its value depends on something only running the script would know (as written).
    Unknown(String),
}

impl Word {
    pub fn literal(&self) -> Option<&str> {
        match self {
            Word::Literal(s) => Some(s),
            Word::Unknown(_) => None,
        }
    }

    /// As written in the script (for messages).
    pub fn shown(&self) -> &str {
        match self {
            Word::Literal(s) | Word::Unknown(s) => s,
        }
    }
}

/// A simple command: its words and the script line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub line: usize,
    pub words: Vec<Word>,
}

impl Command {
    /// The words from the first whose basename is `name` (or `None` when no such word
    /// follows only shell keywords and wrappers: `if`, `!`, `then`, `in_sysroot`, …).
    pub fn invoking(&self, name: &str) -> Option<&[Word]> {
        const LEADERS: [&str; 11] = [
            "!",
            "if",
            "then",
            "else",
            "elif",
            "do",
            "while",
            "until",
            "command",
            "exec",
            "in_sysroot",
        ];
        for (i, w) in self.words.iter().enumerate() {
            let s = w.literal()?;
            if s.rsplit('/').next() == Some(name) {
                return Some(&self.words[i..]);
            }
            if !LEADERS.contains(&s) {
                return None;
            }
        }
        None
    }

    /// The command as written (for messages).
    pub fn shown(&self) -> String {
        let words: Vec<&str> = self.words.iter().map(Word::shown).collect();
        words.join(" ")
    }
}

/// The simple commands of `script`, in order.
pub fn commands(script: &str) -> Vec<Command> {
    let lines = logical_lines(script);
    let vars = literal_assignments(&lines);
    let mut out = Vec::new();
    for (line, text) in lines {
        for words in split_commands(&text) {
            // An unquoted word that expands to nothing is no word (`${DPKG_ROOT:+…}`).
            let words: Vec<Word> = words
                .iter()
                .map(|w| (w, expand(w, &vars)))
                .filter(|(raw, w)| {
                    w.literal() != Some("") || raw.iter().any(|(_, q)| *q != Quote::None)
                })
                .map(|(_, w)| w)
                .collect();
            if !words.is_empty() {
                out.push(Command { line, words });
            }
        }
    }
    out
}

/// A word as lexed: its pieces, each quoted or not.
type RawWord = Vec<(String, Quote)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
}

/// Lines joined at trailing backslashes, here-document bodies dropped: (first line number,
/// text).
fn logical_lines(script: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    let mut heredoc: Option<(String, bool)> = None;
    for (i, raw) in script.lines().enumerate() {
        if let Some((end, strip)) = &heredoc {
            let l = if *strip {
                raw.trim_start_matches('\t')
            } else {
                raw
            };
            if l == end {
                heredoc = None;
            }
            continue;
        }
        let (n, mut text) = pending.take().unwrap_or((i + 1, String::new()));
        if let Some(body) = raw.strip_suffix('\\') {
            text.push_str(body);
            text.push(' ');
            pending = Some((n, text));
            continue;
        }
        text.push_str(raw);
        heredoc = heredoc_start(&text);
        out.push((n, text));
    }
    if let Some(p) = pending {
        out.push(p);
    }
    out
}

/// `<<WORD` or `<<-WORD` (quoted or not) on a line: the delimiter and whether tabs are
/// stripped.
fn heredoc_start(line: &str) -> Option<(String, bool)> {
    let at = line.find("<<")?;
    let before = &line[..at];
    // Inside quotes or an arithmetic expansion (`$((1 << 2))`) it is no here-document.
    if before.matches('"').count() % 2 == 1
        || before.matches('\'').count() % 2 == 1
        || before.contains("((")
    {
        return None;
    }
    let rest = &line[at + 2..];
    if rest.starts_with('<') {
        return None; // a here-string
    }
    let (strip, rest) = match rest.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let word: String = rest
        .trim_start()
        .chars()
        .take_while(|c| !c.is_whitespace() && !";|&)".contains(*c))
        .filter(|c| !"'\"\\".contains(*c))
        .collect();
    (!word.is_empty()).then_some((word, strip))
}

/// Split one logical line into simple commands of raw words.
fn split_commands(line: &str) -> Vec<Vec<RawWord>> {
    let mut commands = Vec::new();
    let mut words: Vec<RawWord> = Vec::new();
    let mut word: RawWord = Vec::new();
    let mut piece = String::new();
    let mut quote = Quote::None;
    let mut chars = line.chars().peekable();
    let mut redirect = false;
    fn end_piece(piece: &mut String, word: &mut RawWord, q: Quote) {
        if !piece.is_empty() || q != Quote::None {
            word.push((std::mem::take(piece), q));
        }
    }
    let end_word = |word: &mut RawWord, words: &mut Vec<RawWord>, redirect: &mut bool| {
        if !word.is_empty() {
            let w = std::mem::take(word);
            if std::mem::take(redirect) {
                // The target of a redirection is no argument.
            } else {
                words.push(w);
            }
        }
    };
    while let Some(c) = chars.next() {
        match quote {
            Quote::Single => {
                if c == '\'' {
                    end_piece(&mut piece, &mut word, Quote::Single);
                    quote = Quote::None;
                } else {
                    piece.push(c);
                }
            }
            Quote::Double => match c {
                '"' => {
                    end_piece(&mut piece, &mut word, Quote::Double);
                    quote = Quote::None;
                }
                '\\' => {
                    if let Some(n) = chars.next() {
                        if !"$`\"\\".contains(n) {
                            piece.push('\\');
                        }
                        piece.push(n);
                    }
                }
                _ => piece.push(c),
            },
            Quote::None => match c {
                '\'' => {
                    end_piece(&mut piece, &mut word, Quote::None);
                    quote = Quote::Single;
                }
                '"' => {
                    end_piece(&mut piece, &mut word, Quote::None);
                    quote = Quote::Double;
                }
                '\\' => {
                    if let Some(n) = chars.next() {
                        end_piece(&mut piece, &mut word, Quote::None);
                        word.push((n.to_string(), Quote::Single));
                    }
                }
                '#' if piece.is_empty() && word.is_empty() => break,
                '$' if chars.peek() == Some(&'{') => {
                    // `${…}` stays one piece, whatever it holds.
                    piece.push('$');
                    let mut depth = 0;
                    for n in chars.by_ref() {
                        piece.push(n);
                        match n {
                            '{' => depth += 1,
                            '}' => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                    }
                }
                c if c.is_whitespace() => {
                    end_piece(&mut piece, &mut word, Quote::None);
                    end_word(&mut word, &mut words, &mut redirect);
                }
                '>' | '<' => {
                    // `2>&1`, `>/dev/null`, `<file`: the descriptor digits before it are part
                    // of the redirection, and so is the word after it.
                    let digits = word.is_empty() && piece.chars().all(|d| d.is_ascii_digit());
                    if digits {
                        piece.clear();
                    } else {
                        end_piece(&mut piece, &mut word, Quote::None);
                        end_word(&mut word, &mut words, &mut redirect);
                    }
                    while matches!(chars.peek(), Some('>') | Some('&') | Some('<')) {
                        chars.next();
                    }
                    let fd_only = chars
                        .peek()
                        .is_some_and(|d| d.is_ascii_digit() || *d == '-');
                    if fd_only {
                        while chars
                            .peek()
                            .is_some_and(|d| d.is_ascii_digit() || *d == '-')
                        {
                            chars.next();
                        }
                    } else {
                        redirect = true;
                    }
                }
                ';' | '&' | '|' | '(' | ')' => {
                    end_piece(&mut piece, &mut word, Quote::None);
                    end_word(&mut word, &mut words, &mut redirect);
                    if !words.is_empty() {
                        commands.push(std::mem::take(&mut words));
                    }
                }
                _ => piece.push(c),
            },
        }
    }
    end_piece(&mut piece, &mut word, quote);
    end_word(&mut word, &mut words, &mut redirect);
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

/// Variables assigned exactly once in the script, as a command of their own, to a literal
/// value.
fn literal_assignments(lines: &[(usize, String)]) -> BTreeMap<String, Option<String>> {
    let mut vars: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (_, text) in lines {
        for words in split_commands(text) {
            for w in &words {
                let whole: String = w.iter().map(|(s, _)| s.as_str()).collect();
                let Some((name, _)) = whole.split_once('=') else {
                    break;
                };
                let unquoted_name = w
                    .first()
                    .is_some_and(|(s, q)| *q == Quote::None && s.starts_with(name));
                if name.is_empty()
                    || !unquoted_name
                    || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    || name.starts_with(|c: char| c.is_ascii_digit())
                {
                    break;
                }
                let value = (words.len() == 1)
                    .then(|| {
                        let v = &whole[name.len() + 1..];
                        let plain = w
                            .iter()
                            .all(|(s, q)| *q == Quote::Single || !s.contains(['$', '`']));
                        plain.then(|| v.to_string())
                    })
                    .flatten();
                vars.entry(name.to_string())
                    .and_modify(|v| *v = None)
                    .or_insert(value);
            }
        }
    }
    vars
}

/// A raw word's value, or unknown.
fn expand(word: &RawWord, vars: &BTreeMap<String, Option<String>>) -> Word {
    let shown: String = word.iter().map(|(s, _)| s.as_str()).collect();
    let mut out = String::new();
    for (s, q) in word {
        if *q == Quote::Single {
            out.push_str(s);
            continue;
        }
        if s.contains('`') {
            return Word::Unknown(shown);
        }
        let mut rest = s.as_str();
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            let (name, len) = if let Some(inner) = after.strip_prefix('{') {
                let Some(end) = inner.find('}') else {
                    return Word::Unknown(shown);
                };
                (&inner[..end], end + 2)
            } else {
                let n = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..n], n)
            };
            let var = name
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("");
            if var == "DPKG_ROOT" {
                // Unset in a normal install: `${DPKG_ROOT:+…}` and `$DPKG_ROOT` are empty,
                // `${DPKG_ROOT:-x}` is x.
                if let Some((_, default)) = name.split_once(":-") {
                    out.push_str(default);
                }
            } else if var.is_empty() || var.len() != name.len() {
                return Word::Unknown(shown);
            } else {
                match vars.get(var) {
                    Some(Some(v)) => out.push_str(v),
                    _ => return Word::Unknown(shown),
                }
            }
            rest = &after[len..];
        }
        out.push_str(rest);
    }
    Word::Literal(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(c: &Command) -> Vec<&str> {
        c.words.iter().map(|w| w.literal().unwrap_or("?")).collect()
    }

    #[test]
    fn reads_debian_lines() {
        // nvidia-persistenced 535.171.04-1~deb12u1's postinst.
        let s = "if [ \"$1\" = \"configure\" ]; then\n     if ! getent passwd nvpd >/dev/null; then\n       # Create ad-hoc system user/group\n       adduser --system --group \\\n               --home /var/run/nvpd/ \\\n               --gecos 'NVIDIA Persistence Daemon' \\\n               --no-create-home \\\n               nvpd\n     fi\nfi\n";
        let c = commands(s);
        let add = c.iter().find_map(|c| c.invoking("adduser")).unwrap();
        let words: Vec<&str> = add.iter().map(|w| w.literal().unwrap()).collect();
        assert_eq!(
            words,
            [
                "adduser",
                "--system",
                "--group",
                "--home",
                "/var/run/nvpd/",
                "--gecos",
                "NVIDIA Persistence Daemon",
                "--no-create-home",
                "nvpd"
            ]
        );
        assert_eq!(
            c.iter()
                .find(|c| c.invoking("adduser").is_some())
                .unwrap()
                .line,
            4
        );
        assert!(c.iter().any(|c| c.invoking("getent").is_some()));
        assert!(c.iter().all(|c| c.invoking("nvpd").is_none()));
    }

    #[test]
    fn redirections_operators_and_dpkg_root() {
        let c = commands("  addgroup --quiet --system netdev || true\n\tdeb-systemd-helper enable 'ssh.service' >/dev/null 2>&1 || true\n    systemctl ${DPKG_ROOT:+--root=\"$DPKG_ROOT\"} enable getty@tty1.service || true\n");
        assert_eq!(lit(&c[0]), ["addgroup", "--quiet", "--system", "netdev"]);
        assert_eq!(lit(&c[1]), ["true"]);
        assert_eq!(lit(&c[2]), ["deb-systemd-helper", "enable", "ssh.service"]);
        assert_eq!(lit(&c[4]), ["systemctl", "enable", "getty@tty1.service"]);
    }

    #[test]
    fn variables_only_when_known() {
        // dbus-system-bus-common's postinst names its user through a variable.
        let s = "MESSAGEUSER=messagebus\nin_sysroot adduser --system --group \"$MESSAGEUSER\"\nadduser --system \"$1\"\nX=a\nX=b\naddgroup --system $X\n";
        let c = commands(s);
        let add: Vec<&[Word]> = c.iter().filter_map(|c| c.invoking("adduser")).collect();
        assert_eq!(add[0][3], Word::Literal("messagebus".into()));
        assert_eq!(add[1][2], Word::Unknown("$1".into()));
        let g = c.iter().find_map(|c| c.invoking("addgroup")).unwrap();
        assert_eq!(g[2], Word::Unknown("$X".into()));
    }

    #[test]
    fn heredocs_and_comments_are_not_commands() {
        // passwd's postinst.
        let s = "\t\tgroupadd -g 42 shadow || (\n    cat <<EOF\nadduser --system evil\nEOF\n    exit 1\n  )\n# adduser --system commented\n";
        let c = commands(s);
        let adds: Vec<_> = c.iter().filter_map(|c| c.invoking("adduser")).collect();
        assert!(adds.is_empty(), "{c:?}");
        assert_eq!(lit(&c[0]), ["groupadd", "-g", "42", "shadow"]);
        // `<<` in quotes or arithmetic starts nothing.
        let c = commands("echo \"a << b\"\nx=$((1 << 2))\naddgroup --system g\n");
        assert!(c.iter().any(|c| c.invoking("addgroup").is_some()), "{c:?}");
    }
}

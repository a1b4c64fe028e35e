//! `.dist-info/entry_points.txt`: the `console_scripts` and `gui_scripts` groups become
//! launcher scripts in the image's scripts directory, whose `#!` is the image's interpreter
//! (never the build host's), with the body pip writes.
//!
//! Names and object references are checked before any text is generated: a name is one path
//! component, a reference is `module.path:attr.path` of Python identifiers, so nothing from the
//! wheel is pasted into the launcher except identifiers.

/// One script to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPoint {
    /// `console_scripts` or `gui_scripts`.
    pub group: &'static str,
    /// The script's file name.
    pub name: String,
    pub module: String,
    /// The callable's dotted path inside the module.
    pub attr: String,
}

/// Why an entry point was refused: (group, name, reason).
pub type Refusal = (String, String, String);

/// The script entry points of `text`, in file order (other groups are ignored).
pub fn parse(text: &str) -> Result<Vec<EntryPoint>, Refusal> {
    let mut out = Vec::new();
    let mut group: Option<&'static str> = None;
    let mut in_other = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            group = match section.trim() {
                "console_scripts" => Some("console_scripts"),
                "gui_scripts" => Some("gui_scripts"),
                _ => None,
            };
            in_other = group.is_none();
            continue;
        }
        let Some(g) = group else {
            if in_other {
                continue;
            }
            return Err(("".into(), line.into(), "it is outside any `[group]`".into()));
        };
        let refuse = |name: &str, why: String| (g.to_string(), name.to_string(), why);
        let (name, value) = line
            .split_once('=')
            .ok_or_else(|| refuse(line, "it is not `name = module:attr`".into()))?;
        let name = name.trim();
        check_name(name).map_err(|why| refuse(name, why))?;
        let (module, attr) = object_ref(value).map_err(|why| refuse(name, why))?;
        out.push(EntryPoint {
            group: g,
            name: name.to_string(),
            module,
            attr,
        });
    }
    Ok(out)
}

/// A script name is one file name: not empty, no `/`, no NUL, not `.` or `..`, no leading
/// dot or dash, no surrounding space.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.contains(['/', '\\', '\0'])
        || name.chars().any(char::is_control)
        || name.starts_with(['.', '-'])
        || name != name.trim()
    {
        return Err("its name is not a plain file name".into());
    }
    Ok(())
}

/// `module.sub:attr.sub [extra1, extra2]` → (module, attr). Extras are ignored, as pip does.
fn object_ref(value: &str) -> Result<(String, String), String> {
    let value = match value.split_once('[') {
        Some((v, extras)) if extras.trim_end().ends_with(']') => v,
        Some(_) => return Err("its extras are not closed with `]`".into()),
        None => value,
    };
    let (module, attr) = value
        .trim()
        .split_once(':')
        .ok_or_else(|| "its object reference has no `:attr`".to_string())?;
    let (module, attr) = (module.trim(), attr.trim());
    if !dotted(module) {
        return Err(format!("`{module}` is not a module path"));
    }
    if !dotted(attr) {
        return Err(format!("`{attr}` is not an attribute path"));
    }
    Ok((module.to_string(), attr.to_string()))
}

/// Dot-separated Python identifiers.
fn dotted(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|p| {
            let mut c = p.chars();
            c.next().is_some_and(|f| f == '_' || f.is_alphabetic())
                && c.all(|x| x == '_' || x.is_alphanumeric())
        })
}

/// The launcher pip writes for `ep`, starting `#!interpreter`.
pub fn launcher(ep: &EntryPoint, interpreter: &str) -> Vec<u8> {
    let import = ep.attr.split('.').next().unwrap_or(&ep.attr);
    format!(
        "#!{interpreter}\n\
         # -*- coding: utf-8 -*-\n\
         import re\n\
         import sys\n\
         from {module} import {import}\n\
         if __name__ == '__main__':\n    \
         sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n    \
         sys.exit({attr}())\n",
        module = ep.module,
        attr = ep.attr,
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_groups_are_read_and_others_ignored() {
        let text = "[console_scripts]\nnormalizer = charset_normalizer.cli:cli_detect\n\
                    tool=pkg.cli:main.run [fast, extra]\n\n[gui_scripts]\nviewer = pkg.gui:App\n\
                    [pytest11]\nplugin = pkg.plugin\n; comment\n";
        let eps = parse(text).unwrap();
        let got: Vec<(&str, &str, &str, &str)> = eps
            .iter()
            .map(|e| (e.group, e.name.as_str(), e.module.as_str(), e.attr.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "console_scripts",
                    "normalizer",
                    "charset_normalizer.cli",
                    "cli_detect"
                ),
                ("console_scripts", "tool", "pkg.cli", "main.run"),
                ("gui_scripts", "viewer", "pkg.gui", "App"),
            ]
        );
    }

    #[test]
    fn names_and_references_that_could_escape_or_inject_are_refused() {
        for (line, why) in [
            ("../evil = m:f", "plain file name"),
            ("a/b = m:f", "plain file name"),
            (".hidden = m:f", "plain file name"),
            ("x = m", "no `:attr`"),
            ("x = os; import evil:f", "not a module path"),
            ("x = m:f()", "not an attribute path"),
            ("x = m:f [a", "not closed"),
            ("x", "not `name = module:attr`"),
        ] {
            let (g, _, e) = parse(&format!("[console_scripts]\n{line}\n")).unwrap_err();
            assert_eq!(g, "console_scripts");
            assert!(e.contains(why), "{line}: {e}");
        }
        assert!(parse("x = m:f\n").is_err(), "outside a group");
    }

    #[test]
    fn the_launcher_uses_the_given_interpreter() {
        let ep = EntryPoint {
            group: "console_scripts",
            name: "tool".into(),
            module: "pkg.cli".into(),
            attr: "main.run".into(),
        };
        let text = String::from_utf8(launcher(&ep, "/usr/bin/python3.11")).unwrap();
        assert!(text.starts_with("#!/usr/bin/python3.11\n"), "{text}");
        assert!(text.contains("from pkg.cli import main\n"), "{text}");
        assert!(text.contains("    sys.exit(main.run())\n"), "{text}");
        assert!(
            text.contains(r"re.sub(r'(-script\.pyw|\.exe)?$', '', sys.argv[0])"),
            "{text}"
        );
    }
}

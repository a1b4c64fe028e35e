//! Path patterns of the strip rules: relative to a Python site directory (`triton/backends/amd`,
//! matched below any `site-packages` or `dist-packages` directory) or to the image root
//! (`/usr/lib/x`). A pattern matches its path and everything below it; `*` matches any run
//! of characters within one path component. Path only: the same answer for an entry whatever
//! tree it is in, so a package streamed into its layer is stripped as the whole tree is.

/// The directory names a Python site directory has.
const SITE_DIRS: [&str; 2] = ["site-packages", "dist-packages"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    site: bool,
    parts: Vec<String>,
}

impl PathPattern {
    /// `/a/b` is rooted at the image root, `a/b` at a site directory.
    pub fn parse(text: &str) -> PathPattern {
        let site = !text.starts_with('/');
        PathPattern {
            site,
            parts: text
                .split('/')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect(),
        }
    }

    /// Whether `path` (a tree path, no leading `/`) is the pattern's path or below it.
    pub fn matches(&self, path: &str) -> bool {
        let rel = if self.site {
            match site_relative(path) {
                Some(r) => r,
                None => return false,
            }
        } else {
            path
        };
        let mut comps = rel.split('/');
        self.parts
            .iter()
            .all(|p| comps.next().is_some_and(|c| glob(p, c)))
    }
}

/// The part of `path` below its innermost site directory (`pkg/mod.py`), if it has one.
pub fn site_relative(path: &str) -> Option<&str> {
    let mut best = None;
    let mut at = 0;
    for comp in path.split('/') {
        at += comp.len() + 1;
        if SITE_DIRS.contains(&comp) {
            best = Some(at);
        }
    }
    best.and_then(|i| path.get(i..)).filter(|r| !r.is_empty())
}

/// `*` as any run of characters (none included), everything else literal.
fn glob(pattern: &str, text: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for m in middle {
        match rest.find(m) {
            Some(i) => rest = &rest[i + m.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_patterns_match_below_any_site_directory() {
        let p = PathPattern::parse("triton/backends/amd");
        for yes in [
            "usr/local/lib/python3.11/dist-packages/triton/backends/amd",
            "usr/local/lib/python3.11/dist-packages/triton/backends/amd/lib/x.so",
            "opt/venv/lib/python3.12/site-packages/triton/backends/amd/x",
        ] {
            assert!(p.matches(yes), "{yes}");
        }
        for no in [
            "usr/local/lib/python3.11/dist-packages/triton/backends/amdgpu",
            "usr/local/lib/python3.11/dist-packages/triton/backends",
            "triton/backends/amd",
            "usr/lib/triton/backends/amd",
        ] {
            assert!(!p.matches(no), "{no}");
        }
        assert_eq!(site_relative("usr/lib/python3/dist-packages"), None);
    }

    #[test]
    fn rooted_patterns_and_globs() {
        let p = PathPattern::parse("/usr/lib/*/libcupti*");
        assert!(p.matches("usr/lib/x86_64-linux-gnu/libcupti.so.12"));
        assert!(!p.matches("usr/lib/x86_64-linux-gnu/libcudart.so.12"));
        assert!(!p.matches("usr/local/lib/python3.11/dist-packages/usr/lib/a/libcupti.so"));
        for (pat, text, want) in [
            ("a*b", "ab", true),
            ("a*b", "axxb", true),
            ("a*b*c", "abbc", true),
            ("a*b", "axxbc", false),
            ("*", "", true),
            ("lib*.so", "lib.so", true),
            ("ab", "abc", false),
        ] {
            assert_eq!(glob(pat, text), want, "{pat} {text}");
        }
    }
}

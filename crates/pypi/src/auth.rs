//! Basic credentials for private indexes: from the URL's user part (removed from the URL, so it
//! is never printed, cached or locked) or from `~/.netrc` (`machine`, `login`, `password`,
//! `default`), as pip does.
//! Must never put a credential in a message, a cache key or the lock.

use std::path::Path;

use base64::Engine as _;

use gpuimg_fetch::Credential;

/// `url` without its user part, and the credential it carried (for its host).
pub fn split_userinfo(mut url: url::Url) -> (url::Url, Option<Credential>) {
    let user = percent_decode(url.username());
    let pass = url.password().map(percent_decode);
    if user.is_empty() && pass.is_none() {
        return (url, None);
    }
    let cred = authority(&url).map(|a| basic(a, &user, pass.as_deref().unwrap_or("")));
    let _ = url.set_username("");
    let _ = url.set_password(None);
    (url, cred)
}

/// `host` or `host:port` of a URL, as [`Credential::authority`] matches it.
pub fn authority(url: &url::Url) -> Option<String> {
    let host = url.host_str()?;
    Some(match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    })
}

fn basic(authority: String, user: &str, pass: &str) -> Credential {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    Credential {
        authority,
        header: format!("Basic {token}"),
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The netrc entry for `host` (a `machine` line, else `default`), as a credential for
/// `authority`. A missing or unreadable file has none.
pub fn from_netrc(netrc: &Path, host: &str, authority: String) -> Option<Credential> {
    use std::io::Read;
    let mut text = String::new();
    fs_err::File::open(netrc)
        .ok()?
        .take(1 << 20)
        .read_to_string(&mut text)
        .ok()?;
    let (user, pass) = lookup(&text, host)?;
    Some(basic(authority, &user, &pass))
}

/// `(login, password)` for `host` in netrc text.
fn lookup(text: &str, host: &str) -> Option<(String, String)> {
    let mut tokens = text.split_whitespace();
    let mut found: Option<(String, String)> = None;
    let mut default: Option<(String, String)> = None;
    // (is this entry the one we want, is it the default entry, login, password)
    let mut cur: Option<(bool, bool, String, String)> = None;
    let mut finish = |cur: &mut Option<(bool, bool, String, String)>| {
        if let Some((want, dflt, l, p)) = cur.take() {
            if want && found.is_none() {
                found = Some((l.clone(), p.clone()));
            }
            if dflt && default.is_none() {
                default = Some((l, p));
            }
        }
    };
    while let Some(t) = tokens.next() {
        match t {
            "machine" => {
                finish(&mut cur);
                let m = tokens.next().unwrap_or_default();
                cur = Some((
                    m.eq_ignore_ascii_case(host),
                    false,
                    String::new(),
                    String::new(),
                ));
            }
            "default" => {
                finish(&mut cur);
                cur = Some((false, true, String::new(), String::new()));
            }
            "login" | "password" | "account" => {
                let v = tokens.next().unwrap_or_default().to_string();
                if let Some(c) = cur.as_mut() {
                    match t {
                        "login" => c.2 = v,
                        "password" => c.3 = v,
                        _ => {}
                    }
                }
            }
            "macdef" => {
                // A macro runs to the next blank line; gpuimg needs none of it.
                finish(&mut cur);
                break;
            }
            _ => {}
        }
    }
    finish(&mut cur);
    found.or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_part_leaves_the_url() {
        let u = url::Url::parse("https://me:s%40cret@idx.invalid:8443/simple/").unwrap();
        let (clean, cred) = split_userinfo(u);
        assert_eq!(clean.as_str(), "https://idx.invalid:8443/simple/");
        let cred = cred.unwrap();
        assert_eq!(cred.authority, "idx.invalid:8443");
        let want = base64::engine::general_purpose::STANDARD.encode("me:s@cret");
        assert_eq!(cred.header, format!("Basic {want}"));
        assert!(!format!("{cred:?}").contains(&want));
        let (same, none) = split_userinfo(url::Url::parse("https://idx.invalid/simple").unwrap());
        assert_eq!(same.as_str(), "https://idx.invalid/simple");
        assert!(none.is_none());
    }

    #[test]
    fn netrc_machine_then_default() {
        let text = "machine a.invalid login u1 password p1\ndefault login du password dp\nmachine b.invalid\n  login u2\n  password p2\n";
        assert_eq!(lookup(text, "a.invalid"), Some(("u1".into(), "p1".into())));
        assert_eq!(lookup(text, "B.invalid"), Some(("u2".into(), "p2".into())));
        assert_eq!(lookup(text, "c.invalid"), Some(("du".into(), "dp".into())));
        assert_eq!(lookup("machine a login x password y", "z"), None);
    }
}

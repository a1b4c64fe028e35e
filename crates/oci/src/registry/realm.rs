//! Whether a bearer challenge's token realm may receive the registry's credentials: only a realm
//! on the registry's own host (any port), on another host of the same registrable domain (the
//! public suffix list, through the `psl` crate: `auth.example.com` for `registry.example.com`,
//! never `b.co.uk` for `a.co.uk`), or on a host an auth file holds these same credentials for.
//! Any other realm is asked for a token without credentials. The scheme rule (HTTPS, plain HTTP
//! only to loopback or with `--plain-http`) is the session's. Must never decide from anything
//! the registry chose but the realm's host.

use std::net::IpAddr;

/// Why a realm may have the credentials, or that it may not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RealmTrust {
    /// The registry's own host.
    Registry,
    /// Another host of the registry's registrable domain (the domain).
    SameSite(String),
    /// An auth file holds these credentials for the realm's host (where).
    Configured(String),
    /// None of those: the realm gets no credentials.
    Foreign,
}

impl RealmTrust {
    pub fn allows(&self) -> bool {
        !matches!(self, RealmTrust::Foreign)
    }

    /// Why, for `--verbose`.
    pub fn why(&self) -> String {
        match self {
            RealmTrust::Registry => "the registry's own host".into(),
            RealmTrust::SameSite(d) => format!("of the registry's registrable domain `{d}`"),
            RealmTrust::Configured(s) => format!("configured for them in {s}"),
            RealmTrust::Foreign => "neither the registry's host, nor of its registrable domain, nor configured for these credentials in an auth file".into(),
        }
    }
}

/// A URL host without brackets and a final dot, lower-cased.
fn norm(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// The registrable domain of a DNS name (`None` for an IP address, a bare public suffix, or a
/// single label).
pub fn registrable(host: &str) -> Option<String> {
    let h = norm(host);
    if h.parse::<IpAddr>().is_ok() || !h.contains('.') {
        return None;
    }
    psl::domain_str(&h).map(str::to_string)
}

/// How far the realm on `realm_host` is trusted by a registry on `registry_host`; `configured`
/// says where an auth file holds the same credentials for the realm (asked only when the hosts
/// alone do not decide).
pub fn trust<E>(
    registry_host: &str,
    realm_host: &str,
    configured: impl FnOnce() -> Result<Option<String>, E>,
) -> Result<RealmTrust, E> {
    let (reg, realm) = (norm(registry_host), norm(realm_host));
    if !realm.is_empty() && reg == realm {
        return Ok(RealmTrust::Registry);
    }
    if let (Some(a), Some(b)) = (registrable(&reg), registrable(&realm)) {
        if a == b {
            return Ok(RealmTrust::SameSite(a));
        }
    }
    Ok(match configured()? {
        Some(source) => RealmTrust::Configured(source),
        None => RealmTrust::Foreign,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(reg: &str, realm: &str) -> RealmTrust {
        trust::<()>(reg, realm, || Ok(None)).unwrap()
    }

    #[test]
    fn the_registry_host_and_its_registrable_domain_are_trusted() {
        assert_eq!(
            hosts("r.example.com", "R.Example.com."),
            RealmTrust::Registry
        );
        assert_eq!(hosts("127.0.0.1", "127.0.0.1"), RealmTrust::Registry);
        assert_eq!(hosts("::1", "[::1]"), RealmTrust::Registry);
        assert_eq!(
            hosts("registry.example.com", "auth.example.com"),
            RealmTrust::SameSite("example.com".into())
        );
        assert_eq!(
            hosts("example.com", "login.eu.example.com"),
            RealmTrust::SameSite("example.com".into())
        );
        assert_eq!(
            hosts("r.team.example.co.uk", "auth.example.co.uk"),
            RealmTrust::SameSite("example.co.uk".into())
        );
    }

    #[test]
    fn other_sites_public_suffixes_and_addresses_are_not() {
        for (reg, realm) in [
            ("registry.example.com", "example.net"),
            ("registry.example.com", "registry.example.com.evil.net"),
            ("a.co.uk", "b.co.uk"),
            ("alice.github.io", "bob.github.io"),
            ("127.0.0.1", "127.0.0.2"),
            ("10.0.0.1", "10.0.0.2"),
            ("localhost", "other"),
            ("registry.example.com", ""),
            ("", ""),
        ] {
            assert_eq!(hosts(reg, realm), RealmTrust::Foreign, "{reg} → {realm}");
        }
        assert_eq!(registrable("co.uk"), None);
        assert_eq!(registrable("10.1.2.3"), None);
    }

    #[test]
    fn an_auth_file_may_configure_another_host() {
        let t = trust::<()>("r.example.com", "sso.example.net", || {
            Ok(Some("`auths` of /a.json".into()))
        })
        .unwrap();
        assert!(t.allows() && t.why().contains("/a.json"), "{t:?}");
        let asked = std::cell::Cell::new(false);
        let t = trust::<()>("r.example.com", "auth.example.com", || {
            asked.set(true);
            Ok(None)
        })
        .unwrap();
        assert!(t.allows() && !asked.get());
        assert_eq!(
            trust("a.example", "b.example.net", || Err("helper failed")),
            Err("helper failed")
        );
    }
}

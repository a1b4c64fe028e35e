//! Answering a registry's 401: Basic with the push's credentials, or a bearer token from the
//! challenge's realm for the push's scopes (RFC 6750 / the distribution token spec: GET with
//! Basic credentials, or the OAuth2 POST for an identity token).
//!
//! Credentials go to a realm only over HTTPS (plain HTTP only to loopback or with
//! `--plain-http`) and only where `realm.rs` trusts it: the registry's host, its registrable
//! domain, or a host an auth file holds the same credentials for. Any other realm is asked for
//! a token without them. Each host that received them is noted for `--verbose`. Must never put
//! a secret into a message or a note.

use ureq::http::Method;

use super::challenge::{self, Challenge};
use super::credentials::{self, Secret};
use super::realm::{self, RealmTrust};
use super::session::{Auth, Body, Request, Response, Session};
use super::RegistryError;

impl Session {
    /// Answer a 401's challenge: Basic with the credentials, or a token from the realm.
    pub(super) fn authenticate(&self, resp: &Response) -> Result<(), RegistryError> {
        let header = resp.header("www-authenticate").unwrap_or("");
        let Some(ch) = challenge::parse(header) else {
            return Err(RegistryError::Protocol {
                registry: self.registry.clone(),
                reason: format!(
                    "it answered 401 without a usable WWW-Authenticate challenge (`{}`)",
                    header.chars().take(120).collect::<String>()
                ),
            });
        };
        let new = match ch.scheme.as_str() {
            "basic" => {
                let c = self.credentials.as_ref().ok_or_else(|| RegistryError::NoCredentials {
                    registry: self.registry.clone(),
                })?;
                match c.basic_header() {
                    Some(h) => {
                        self.note(format!(
                            "registry credentials of `{}` from {} sent to `{}` (the registry, Basic)",
                            c.user(),
                            c.source,
                            self.registry
                        ));
                        Auth::Basic(h)
                    }
                    None => {
                        return Err(RegistryError::Protocol {
                            registry: self.registry.clone(),
                            reason: format!(
                                "it asks for Basic auth, and {} holds an identity token",
                                c.source
                            ),
                        })
                    }
                }
            }
            "bearer" => {
                // The scopes the registry names (a mount's source, say) join the push's own.
                if let Some(scope) = ch.param("scope") {
                    for s in scope.split(' ').filter(|s| !s.is_empty()) {
                        self.add_scope(s.to_string());
                    }
                }
                Auth::Bearer(self.token(&ch)?)
            }
            other => {
                return Err(RegistryError::Protocol {
                    registry: self.registry.clone(),
                    reason: format!("it asks for the `{other}` auth scheme, which gpuimg does not speak (Basic and Bearer)"),
                })
            }
        };
        *self.auth.lock().unwrap_or_else(|e| e.into_inner()) = new;
        Ok(())
    }

    /// Whether the realm at `url` may have the credentials (decided once per realm host, and
    /// noted for `--verbose`).
    fn realm_trust(&self, url: &url::Url) -> Result<RealmTrust, RegistryError> {
        let host = url.host_str().unwrap_or("");
        let authority = authority(url);
        {
            let known = self.realms.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, t)) = known.iter().find(|(a, _)| *a == authority) {
                return Ok(t.clone());
            }
        }
        let registry_host = url::Url::parse(&self.base)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        let trust = realm::trust(&registry_host, host, || {
            // The realm's own entry in the auth files, when it holds these same credentials.
            let Some(mine) = &self.credentials else {
                return Ok(None);
            };
            let theirs = credentials::find(&self.auth_files, &authority, &self.repo)?;
            Ok::<_, RegistryError>(theirs.filter(|c| c.secret == mine.secret).map(|c| c.source))
        })?;
        if let Some(c) = &self.credentials {
            self.note(if trust.allows() {
                format!(
                    "registry credentials of `{}` from {} sent to the token realm `{authority}` ({})",
                    c.user(),
                    c.source,
                    trust.why()
                )
            } else {
                format!(
                    "the token realm `{authority}` got no credentials: it is {}",
                    trust.why()
                )
            });
        }
        self.realms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((authority, trust.clone()));
        Ok(trust)
    }

    /// A bearer token for the push's scopes from the challenge's realm.
    fn token(&self, ch: &Challenge) -> Result<String, RegistryError> {
        let realm = ch.param("realm").ok_or_else(|| RegistryError::Protocol {
            registry: self.registry.clone(),
            reason: "its Bearer challenge names no realm".into(),
        })?;
        let mut url = url::Url::parse(realm).map_err(|e| RegistryError::Protocol {
            registry: self.registry.clone(),
            reason: format!("its token realm `{realm}` is not a URL: {e}"),
        })?;
        let plain_ok = self.plain_http || url.host_str().is_some_and(super::is_loopback);
        if url.scheme() != "https" && !(url.scheme() == "http" && plain_ok) {
            return Err(RegistryError::Protocol {
                registry: self.registry.clone(),
                reason: format!(
                    "its token realm `{realm}` is not HTTPS; credentials go over plain HTTP only to loopback or with `--plain-http`"
                ),
            });
        }
        let trust = self.realm_trust(&url)?;
        let credentials = self.credentials.as_ref().filter(|_| trust.allows());
        let scopes = self
            .scopes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let service = ch.param("service").map(String::from);
        let resp = match credentials.map(|c| &c.secret) {
            Some(Secret::IdentityToken(t)) => {
                let mut form = url::form_urlencoded::Serializer::new(String::new());
                form.append_pair("grant_type", "refresh_token")
                    .append_pair("refresh_token", t)
                    .append_pair("client_id", "gpuimg");
                if let Some(s) = &service {
                    form.append_pair("service", s);
                }
                form.append_pair("scope", &scopes.join(" "));
                let body = form.finish();
                let req = Request::new(Method::POST, url.to_string())
                    .header("Content-Type", "application/x-www-form-urlencoded")
                    .body(Body::Bytes(body.as_bytes()));
                self.send_plain(&req)?
            }
            other => {
                {
                    let mut q = url.query_pairs_mut();
                    if let Some(s) = &service {
                        q.append_pair("service", s);
                    }
                    for s in &scopes {
                        q.append_pair("scope", s);
                    }
                }
                let mut req = Request::new(Method::GET, url.to_string());
                if let (Some(Secret::Basic { .. }), Some(c)) = (other, credentials) {
                    if let Some(h) = c.basic_header() {
                        req = req.header("Authorization", h);
                    }
                }
                self.send_plain(&req)?
            }
        };
        if resp.status == 401 || resp.status == 403 {
            if let (RealmTrust::Foreign, Some(c)) = (&trust, &self.credentials) {
                return Err(RegistryError::UntrustedRealm {
                    registry: self.registry.clone(),
                    realm: authority(&url),
                    user: c.user().to_string(),
                    source_name: c.source.clone(),
                    status: resp.status,
                });
            }
            return Err(self.refused(&resp));
        }
        if resp.status != 200 {
            return Err(RegistryError::Status {
                registry: self.registry.clone(),
                what: "token request".into(),
                status: resp.status,
                message: resp.error_text(),
            });
        }
        #[derive(serde::Deserialize)]
        struct Token {
            #[serde(default)]
            token: Option<String>,
            #[serde(default)]
            access_token: Option<String>,
        }
        let t: Token = serde_json::from_slice(&resp.body).map_err(|e| RegistryError::Protocol {
            registry: self.registry.clone(),
            reason: format!("its token answer is not JSON: {e}"),
        })?;
        t.token
            .or(t.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| RegistryError::Protocol {
                registry: self.registry.clone(),
                reason: "its token answer holds no token".into(),
            })
    }

    pub(super) fn refused(&self, resp: &Response) -> RegistryError {
        match &self.credentials {
            None => RegistryError::NoCredentials {
                registry: self.registry.clone(),
            },
            Some(c) => RegistryError::Refused {
                registry: self.registry.clone(),
                user: c.user().to_string(),
                source_name: c.source.clone(),
                status: resp.status,
            },
        }
    }
}

/// A URL's `HOST[:PORT]` (the port only when the URL names one), as auth files key hosts.
fn authority(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

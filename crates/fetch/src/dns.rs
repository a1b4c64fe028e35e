//! A DNS cache for one [`super::Fetcher`]: each host is looked up once per fetcher, not once per
//! connection (a resolver that drops the odd query costs a 5 s timeout each time otherwise).
//!
//! Must never invent an address: misses go to ureq's default resolver.

use std::collections::HashMap;
use std::sync::Mutex;

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

#[derive(Debug, Default)]
pub struct DnsCache {
    inner: DefaultResolver,
    cache: Mutex<HashMap<String, ResolvedSocketAddrs>>,
}

impl Resolver for DnsCache {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let key = format!(
            "{}://{}",
            uri.scheme_str().unwrap_or(""),
            uri.authority().map_or("", |a| a.as_str())
        );
        if let Ok(cache) = self.cache.lock() {
            if let Some(hit) = cache.get(&key) {
                return Ok(hit.clone());
            }
        }
        let addrs = self.inner.resolve(uri, config, timeout)?;
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(key, addrs.clone());
        }
        Ok(addrs)
    }
}

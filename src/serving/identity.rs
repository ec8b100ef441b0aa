//! Who is calling the secure port: the user a request is made as, the request headers a front
//! proxy names that user in, and what the TLS handshake learned of the client ([`Peer`]).
//! [`super::tls`] fills these in, [`super::auth`] decides on them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue};

/// The group every authenticated user gets (upstream's `AuthenticatedGroupAdder`).
pub(super) const AUTHENTICATED: &str = "system:authenticated";

/// An authenticated user, as a TokenReview or a client certificate names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    pub(super) fn with_authenticated_group(mut self) -> Self {
        if !self.groups.iter().any(|g| g == AUTHENTICATED) {
            self.groups.push(AUTHENTICATED.to_string());
        }
        self
    }
}

/// Which request headers a front proxy names the user in (upstream's `RequestHeaderConfig`),
/// and which certificate CNs may act as front proxies (empty: any the CA verifies).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeaderNames {
    pub username: Vec<String>,
    pub uid: Vec<String>,
    pub group: Vec<String>,
    pub extra_prefix: Vec<String>,
    pub allowed_names: Vec<String>,
}

impl HeaderNames {
    /// Upstream's `requestHeaderAuthRequestHandler`: the first non-empty username header is
    /// the user (none: not authenticated this way); the first non-empty uid header the uid;
    /// every non-empty value of the group headers a group; each header starting with an extra
    /// prefix an extra, keyed by the rest of its name, lowercased and %-unescaped.
    pub fn user(&self, headers: &HeaderMap) -> Option<User> {
        let text = |value: &HeaderValue| String::from_utf8_lossy(value.as_bytes()).into_owned();
        let first = |names: &[String]| {
            names
                .iter()
                .filter_map(|name| headers.get(name.as_str()).map(text))
                .find(|value| !value.is_empty())
        };
        let name = first(&self.username)?;
        let uid = first(&self.uid).unwrap_or_default();
        let groups = self
            .group
            .iter()
            .flat_map(|name| headers.get_all(name.as_str()).iter().map(text))
            .filter(|value| !value.is_empty())
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for prefix in &self.extra_prefix {
            let prefix = prefix.to_ascii_lowercase();
            for (header, value) in headers {
                if let Some(key) = header.as_str().strip_prefix(prefix.as_str()) {
                    extra.entry(unescape(key)).or_default().push(text(value));
                }
            }
        }
        Some(User {
            name,
            uid,
            groups,
            extra,
        })
    }
}

/// Go's `url.PathUnescape`, keeping the key as it is when it is not valid %-encoding (as
/// upstream: extras are always recorded).
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(byte) => {
                    out.push(byte);
                    i += 3;
                    continue;
                }
                None => return key.to_string(),
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_string())
}

/// The remote end of a TLS connection: its address; the user its certificate names when the
/// client CA verified it; and the header names to read the user from when the front-proxy CA
/// verified it (with an allowed CN).
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    pub certificate_user: Option<User>,
    pub front_proxy: Option<Arc<HeaderNames>>,
}

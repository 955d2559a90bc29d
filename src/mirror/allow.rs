//! Which origins the mirror may fetch from (`--allow-origin`), and the guard that
//! keeps redirects and DNS answers from reaching link-local, private or cluster
//! addresses the operator did not list: the mirror is no open proxy and no way
//! into the node's metadata service.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use url::Url;

/// One allowed origin: a scheme, a host, a port and a path prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Allowed {
    scheme: &'static str,
    host: String,
    port: Option<u16>,
    /// Ends with `/`: matched on whole path segments.
    prefix: String,
    /// The prefix as given when it did not end with `/` (`/maven2`): that path
    /// itself is allowed too.
    exact: Option<String>,
    shown: String,
}

/// The allow-list: every URI the mirror fetches matches one entry.
#[derive(Debug, Clone, Default)]
pub(crate) struct AllowList(Arc<Vec<Allowed>>);

/// The scheme as the mirror compares it (`s3a` is `s3`).
fn canonical_scheme(scheme: &str) -> Option<&'static str> {
    match scheme.to_ascii_lowercase().as_str() {
        "http" => Some("http"),
        "https" => Some("https"),
        "s3" | "s3a" => Some("s3"),
        _ => None,
    }
}

impl AllowList {
    /// Parses `--allow-origin` values; every bad one is named.
    pub(crate) fn parse(values: &[String]) -> Result<AllowList, Vec<String>> {
        let mut out = Vec::new();
        let mut problems = Vec::new();
        for value in values.iter().map(|v| v.trim()).filter(|v| !v.is_empty()) {
            match Self::one(value) {
                Ok(allowed) => out.push(allowed),
                Err(reason) => problems.push(format!("--allow-origin {value}: {reason}")),
            }
        }
        if out.is_empty() && problems.is_empty() {
            problems.push(
                "--allow-origin: no origin given; name each origin the mirror may fetch from (e.g. https://repo1.maven.org/maven2/)"
                    .to_owned(),
            );
        }
        if problems.is_empty() {
            Ok(AllowList(Arc::new(out)))
        } else {
            Err(problems)
        }
    }

    fn one(value: &str) -> Result<Allowed, String> {
        let url = Url::parse(value).map_err(|e| format!("not a URI ({e})"))?;
        let scheme = canonical_scheme(url.scheme()).ok_or_else(|| {
            format!(
                "scheme '{}' is not served by the mirror (http, https, s3, s3a)",
                url.scheme()
            )
        })?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err("credentials do not belong in the allow-list (the mirror's own come from its source flags)".to_owned());
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err("a query or fragment cannot be a prefix".to_owned());
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or("no host (or bucket)")?
            .to_ascii_lowercase();
        let mut prefix = url.path().to_owned();
        let mut exact = None;
        if !prefix.ends_with('/') {
            exact = Some(prefix.clone());
            prefix.push('/');
        }
        Ok(Allowed {
            scheme,
            host,
            port: url.port_or_known_default(),
            prefix,
            exact,
            shown: value.to_owned(),
        })
    }

    /// Whether `uri` lies under an allowed origin (same scheme, host and port,
    /// path under the prefix on a segment boundary, no `..` segments): under
    /// `/good/`, `/good/x` but neither `/good` nor `/goodness`; under `/good`,
    /// also `/good` itself.
    pub(crate) fn permits(&self, uri: &Url) -> bool {
        let Some(scheme) = canonical_scheme(uri.scheme()) else {
            return false;
        };
        let Some(host) = uri.host_str().map(str::to_ascii_lowercase) else {
            return false;
        };
        let path = uri.path();
        if !plain_path(path)
            || uri.query().is_some()
            || !uri.username().is_empty()
            || uri.password().is_some()
        {
            return false;
        }
        self.0.iter().any(|a| {
            a.scheme == scheme
                && a.host == host
                && a.port == uri.port_or_known_default()
                && (path.starts_with(&a.prefix) || a.exact.as_deref() == Some(path))
        })
    }

    /// Whether `host` is the host of an allowed origin (its addresses are then
    /// the operator's choice, private or not).
    pub(crate) fn lists_host(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.0.iter().any(|a| {
            a.host.trim_start_matches('[').trim_end_matches(']') == host.to_ascii_lowercase()
        })
    }

    /// The S3 buckets listed (the mirror configures one store each).
    pub(crate) fn buckets(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .0
            .iter()
            .filter(|a| a.scheme == "s3")
            .map(|a| a.host.clone())
            .collect();
        out.dedup();
        out
    }

    /// The entries as given, for the start-up log.
    pub(crate) fn shown(&self) -> String {
        self.0
            .iter()
            .map(|a| a.shown.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether a redirect to `next` may be followed: a URI under an allowed
    /// origin, or one on another host whose literal address is public (names are
    /// checked when resolved, by [`GuardedResolver`]); never with credentials.
    pub(crate) fn redirect_allowed(&self, next: &Url) -> Result<(), String> {
        let Some(host) = next.host() else {
            return Err("a redirect without a host".to_owned());
        };
        if !next.username().is_empty() || next.password().is_some() {
            return Err("a redirect carrying credentials".to_owned());
        }
        if self.permits(next) {
            return Ok(());
        }
        // A listed host is trusted for its listed ports and paths only: an open
        // redirect there must not reach its other ports or paths.
        if self.lists_host(&host.to_string()) {
            return Err(format!(
                "a redirect to {}, not under any --allow-origin",
                crate::util::redact::redact_url(next.as_str())
            ));
        }
        let ip = match host {
            url::Host::Domain(_) => return Ok(()),
            url::Host::Ipv4(ip) => IpAddr::V4(ip),
            url::Host::Ipv6(ip) => IpAddr::V6(ip),
        };
        if is_public(ip) {
            Ok(())
        } else {
            Err(format!(
                "a redirect to {ip}, a loopback, private or link-local address not in --allow-origin"
            ))
        }
    }
}

/// Whether `path` means what it says to any server: no segment that decodes to
/// `.` or `..` or holds an encoded `/`, `\`, `%` (double encoding) or `;` (path
/// parameters some servers strip), no backslash. Origins decode these; the
/// allow-list's prefix check must see what they will.
fn plain_path(path: &str) -> bool {
    path.split('/').all(|segment| {
        let decoded = percent_encoding::percent_decode_str(segment).decode_utf8_lossy();
        let raw = segment.to_ascii_lowercase();
        !(decoded == "."
            || decoded == ".."
            || decoded.contains(['/', '\\', ';'])
            || raw.contains("%25")
            || raw.contains('\\'))
    })
}

/// Whether `ip` is a public unicast address: not loopback, private, link-local,
/// shared (CGNAT), unique-local, multicast, documentation or unspecified.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return public_v4(v4);
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (first == 0x2001 && v6.segments()[1] == 0x0db8) // documentation
                || v6 == Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0))
        }
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0) // IETF protocol assignments
        || a >= 240)
}

/// DNS for the mirror's HTTP client: a name that is not the host of an allowed
/// origin may only resolve to public addresses (a redirect to a name that points
/// at 169.254.169.254 or a cluster service is refused at connect time, so DNS
/// rebinding cannot get around the redirect check).
pub(crate) struct GuardedResolver {
    pub(crate) allow: AllowList,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow = self.allow.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if allow.lists_host(&host) {
                return Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs);
            }
            let public: Vec<SocketAddr> = addrs.into_iter().filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                return Err(format!(
                    "{host} resolves only to loopback, private or link-local addresses and is not in --allow-origin"
                )
                .into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(values: &[&str]) -> AllowList {
        AllowList::parse(&values.iter().map(|v| v.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn prefixes_match_whole_segments() {
        let allow = list(&[
            "https://repo.example.com/maven2",
            "http://127.0.0.1:8080/",
            "s3a://jars/team-a/",
        ]);
        let ok = |u: &str| allow.permits(&Url::parse(u).unwrap());
        assert!(ok("https://repo.example.com/maven2/a/b.jar"));
        assert!(ok("https://REPO.example.com:443/maven2/a.jar"));
        assert!(!ok("https://repo.example.com/maven2-evil/a.jar"));
        assert!(!ok("https://repo.example.com/other/a.jar"));
        assert!(!ok("http://repo.example.com/maven2/a.jar"));
        assert!(!ok("https://repo.example.com:8443/maven2/a.jar"));
        assert!(!ok("https://repo.example.com/maven2/%2e%2e/secret"));
        assert!(ok("https://repo.example.com/maven2/../maven2/x.jar"));
        assert!(!ok("https://repo.example.com/maven2/../x.jar"));
        assert!(ok("http://127.0.0.1:8080/anything"));
        assert!(!ok("http://127.0.0.1:8081/anything"));
        assert!(ok("s3://jars/team-a/x.jar"));
        assert!(!ok("s3://jars/team-b/x.jar"));
        assert!(!ok("file:///etc/passwd"));
        for sneaky in [
            "https://repo.example.com/maven2/..%2fsecret",
            "https://repo.example.com/maven2/..%252fsecret",
            "https://repo.example.com/maven2/.%2e%2fsecret",
            "https://repo.example.com/maven2/%2e./x",
            "https://repo.example.com/maven2/x/..%2f..%2fsecret",
            "https://repo.example.com/maven2/..%5csecret",
            "https://repo.example.com/maven2/..;/secret",
            "https://repo.example.com/maven2/a.jar?token=x",
            "https://u:p@repo.example.com/maven2/a.jar",
        ] {
            assert!(!ok(sneaky), "{sneaky}");
        }
        assert!(!ok("http://169.254.169.254/latest/meta-data/"));
    }

    #[test]
    fn a_prefix_ending_in_a_slash_allows_only_what_lies_under_it() {
        let allow = list(&["http://o/good/", "http://o/plain"]);
        let ok = |u: &str| allow.permits(&Url::parse(u).unwrap());
        assert!(ok("http://o/good/a.jar"));
        assert!(ok("http://o/good/"));
        assert!(!ok("http://o/good"));
        assert!(!ok("http://o/goodness"));
        assert!(!ok("http://o/goodness/a.jar"));
        // Without the slash, the path itself and what lies under it.
        assert!(ok("http://o/plain"));
        assert!(ok("http://o/plain/a.jar"));
        assert!(!ok("http://o/plainly"));
    }

    #[test]
    fn bad_entries_are_named() {
        let bad = |v: &str| AllowList::parse(&[v.to_owned()]).unwrap_err().join("\n");
        assert!(bad("ftp://x/").contains("scheme 'ftp'"));
        assert!(bad("https://u:p@x/").contains("credentials"));
        assert!(bad("not a uri").contains("not a URI"));
        assert!(AllowList::parse(&[]).unwrap_err()[0].contains("no origin given"));
    }

    #[test]
    fn only_public_addresses_pass() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["8.8.8.8", "151.101.0.1", "2a00:1450:4001::1"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
        let allow = list(&["http://127.0.0.1:8080/"]);
        assert!(allow
            .redirect_allowed(&Url::parse("http://127.0.0.1:8080/y").unwrap())
            .is_ok());
        // A listed host's other ports and paths are not reachable by redirect.
        assert!(allow
            .redirect_allowed(&Url::parse("http://127.0.0.1:9999/x").unwrap())
            .is_err());
        let narrow = list(&["http://127.0.0.1:8080/repo/"]);
        assert!(narrow
            .redirect_allowed(&Url::parse("http://127.0.0.1:8080/secret").unwrap())
            .is_err());
        assert!(narrow
            .redirect_allowed(&Url::parse("http://u:p@127.0.0.1:8080/repo/a").unwrap())
            .is_err());
        assert!(allow
            .redirect_allowed(&Url::parse("http://169.254.169.254/x").unwrap())
            .is_err());
        assert!(allow
            .redirect_allowed(&Url::parse("http://[fd00::1]/x").unwrap())
            .is_err());
        assert!(allow
            .redirect_allowed(&Url::parse("https://cdn.example.com/x").unwrap())
            .is_ok());
    }
}

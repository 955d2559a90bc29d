//! The checks `stage upload` makes before any network traffic (a usage error when one
//! fails): the server URL, the owner (namespace, labels), the Secret name, and every
//! file (a readable regular file with a name the archive rules and the localizer
//! accept, unique within its bundle).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use url::Url;

use super::UploadError;
use crate::cli::{StageKind, UploadArgs};
use crate::env_vars as env;
use crate::net::CaFile;
use crate::stage::api::{self, ResourceOwner};
use crate::stage::names::{check_dns_label, check_dns_subdomain, check_label_key, is_label_value};

/// The namespace of the owner when `--namespace` is not given.
pub(crate) const DEFAULT_NAMESPACE: &str = "default";

/// One file of the bundle: where it is read from and its entry name.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub(super) path: PathBuf,
    pub(super) name: String,
}

/// Everything checked before the first byte goes out.
#[derive(Debug)]
pub(super) struct Plan {
    /// The server's base URL as given, without a trailing `/`.
    pub(super) server: String,
    /// The server's base URL as parsed (it may carry a path prefix).
    pub(super) base: Url,
    pub(super) owner: ResourceOwner,
    /// One bundle, or two (jars, then files) with `--jars` and `--files`.
    pub(super) bundles: Vec<BundlePlan>,
    pub(super) ca_files: Vec<CaFile>,
    /// The bearer token to upload with (`--token-file`, the kubeconfig's), if any.
    pub(super) token: Option<String>,
    /// `--connect-timeout`.
    pub(super) connect_timeout: Duration,
    /// `--stall-timeout`: how long the server may take nothing and answer nothing.
    pub(super) stall_timeout: Duration,
}

/// The files of one bundle.
#[derive(Debug)]
pub(super) struct BundlePlan {
    pub(super) kind: StageKind,
    pub(super) members: Vec<Member>,
    pub(super) bytes: u64,
}

impl StageKind {
    /// `jars` or `files`, as printed and logged.
    pub(super) fn name(self) -> &'static str {
        match self {
            StageKind::Jars => "jars",
            StageKind::Files => "files",
        }
    }
}

/// Checks every argument; the plan of the upload.
pub(super) fn plan(args: &UploadArgs) -> Result<Plan, UploadError> {
    let (server, base) = server_url(&args.server)?;
    let namespace = args.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
    check_dns_label(namespace).map_err(|why| {
        UploadError::Usage(format!(
            "--namespace {:?} {why}",
            namespace.escape_debug().to_string()
        ))
    })?;
    if let Some(name) = &args.secret_manifest {
        check_dns_subdomain(name).map_err(|why| {
            UploadError::Usage(format!(
                "--secret-manifest {:?} {why} (a Kubernetes object name)",
                name.escape_debug().to_string()
            ))
        })?;
    }
    let labels = labels(&args.labels)?;
    let ca_files = ca_files(args);
    let bundles = bundle_lists(args)
        .into_iter()
        .map(|(kind, paths)| bundle_plan(kind, paths))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Plan {
        server,
        base,
        owner: ResourceOwner {
            namespace: namespace.to_owned(),
            labels,
            owner_type: api::OWNER_TYPE_POD.to_owned(),
        },
        bundles,
        ca_files,
        token: None,
        connect_timeout: args.connect_timeout,
        stall_timeout: args.stall_timeout,
    })
}

/// `--ca-cert` files, then `SSL_CERT_FILE`.
fn ca_files(args: &UploadArgs) -> Vec<CaFile> {
    let mut ca_files: Vec<CaFile> = args
        .ca_cert
        .iter()
        .map(|path| CaFile {
            path: path.clone(),
            origin: format!("--ca-cert or {}", env::STAGE_CA_CERT),
        })
        .collect();
    if let Some(path) = std::env::var_os(env::SSL_CERT_FILE).filter(|p| !p.is_empty()) {
        ca_files.push(CaFile {
            path: PathBuf::from(path),
            origin: env::SSL_CERT_FILE.to_owned(),
        });
    }
    ca_files
}

/// The FILES of `--kind`, or the `--jars` and `--files` bundles (jars first).
fn bundle_lists(args: &UploadArgs) -> Vec<(StageKind, &[PathBuf])> {
    if args.jars.is_empty() && args.files_bundle.is_empty() {
        vec![(args.kind, &args.files)]
    } else {
        [
            (StageKind::Jars, &args.jars),
            (StageKind::Files, &args.files_bundle),
        ]
        .into_iter()
        .filter(|(_, list)| !list.is_empty())
        .map(|(kind, list)| (kind, list.as_slice()))
        .collect()
    }
}

/// Checks the files of one bundle: each usable, names unique.
fn bundle_plan(kind: StageKind, paths: &[PathBuf]) -> Result<BundlePlan, UploadError> {
    let mut members = Vec::with_capacity(paths.len());
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    let mut bytes = 0u64;
    for path in paths {
        let (member, len) = member(path)?;
        // A jar's path goes into a ':'-separated classpath: fetch would leave it off.
        if kind == StageKind::Jars && member.name.ends_with(".jar") && member.name.contains(':') {
            return Err(UploadError::Usage(format!(
                "{}: a jar named {:?} cannot go on a classpath (':' separates its entries); rename it",
                path.display(),
                member.name
            )));
        }
        if let Some(first) = seen.insert(member.name.clone(), path.clone()) {
            return Err(UploadError::Usage(format!(
                "{} and {} both have the name {:?}; entries are flat, so names must be unique",
                first.display(),
                path.display(),
                member.name
            )));
        }
        bytes += len;
        members.push(member);
    }
    Ok(BundlePlan {
        kind,
        members,
        bytes,
    })
}

/// The base URL as shown (no trailing `/`) and as parsed.
fn server_url(given: &str) -> Result<(String, Url), UploadError> {
    let bad = |why: &str| UploadError::Usage(format!("--server {given:?}: {why}"));
    let url = Url::parse(given.trim()).map_err(|e| bad(&format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(
            "credentials in the URL are not supported (the server needs none for uploads)",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("a query or fragment is not supported"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    let shown = given.trim().trim_end_matches('/').to_owned();
    Ok((shown, url))
}

/// `--label KEY=VALUE` in Kubernetes label syntax; duplicates refused.
fn labels(given: &[String]) -> Result<BTreeMap<String, String>, UploadError> {
    let mut labels = BTreeMap::new();
    for item in given {
        let bad = |why: &str| {
            UploadError::Usage(format!(
                "--label {:?}: {why}",
                item.escape_debug().to_string()
            ))
        };
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| bad("expected KEY=VALUE"))?;
        let (key, value) = (key.trim(), value.trim());
        check_label_key(key).map_err(|why| bad(&why))?;
        if !is_label_value(value) {
            return Err(bad(
                "the value must be at most 63 characters [A-Za-z0-9._-], starting and ending alphanumeric",
            ));
        }
        if labels
            .insert(key.to_owned(), value.to_owned())
            .is_some_and(|old| old != value)
        {
            return Err(bad("the key is given twice with different values"));
        }
    }
    Ok(labels)
}

/// Checks one FILES argument: a readable regular file whose name the archive rules
/// and the localizer accept. Returns it with its size.
fn member(path: &Path) -> Result<(Member, u64), UploadError> {
    let bad = |why: &str| UploadError::Usage(format!("{}: {why}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => bad("no such file"),
        _ => bad(&format!("cannot read: {e}")),
    })?;
    if meta.is_dir() {
        return Err(bad(
            "is a directory; stage upload takes regular files only (bundle a directory as a .tar.gz and upload that)",
        ));
    }
    if !meta.is_file() {
        return Err(bad("is not a regular file"));
    }
    let name = path
        .file_name()
        .ok_or_else(|| bad("has no file name"))?
        .to_str()
        .ok_or_else(|| bad("its name is not valid UTF-8"))?
        .to_owned();
    entry_name_ok(&name).map_err(|why| bad(&format!("its name {name:?} {why}")))?;
    crate::util::fs::open_regular(path).map_err(|e| bad(&format!("cannot open: {e}")))?;
    Ok((
        Member {
            path: path.to_owned(),
            name,
        },
        meta.len(),
    ))
}

/// The name rules of the localizer's destinations plus those of the archive
/// rules the server applies to entries (a Windows drive prefix).
fn entry_name_ok(name: &str) -> Result<(), &'static str> {
    crate::layout::check_name(name)?;
    if crate::layout::OUTPUT_NAMES.contains(&name) {
        return Err("is the name of an output of fetch (the classpath file, the env snippet, the report or the SBOM), which the staging server refuses");
    }
    let b = name.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err("looks like a Windows drive prefix, which the archive rules refuse");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("app.jar");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = crate::util::fs::open_regular(&fifo).unwrap_err();
        assert!(err.to_string().contains("regular file"), "{err}");
        let file = dir.path().join("lib.jar");
        std::fs::write(&file, b"jar").unwrap();
        let mut text = String::new();
        crate::util::fs::open_regular(&file)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "jar");
    }

    #[test]
    fn server_urls() {
        let (shown, url) = server_url("http://h:10000/").unwrap();
        assert_eq!(shown, "http://h:10000");
        assert_eq!(
            api::resources_url(&url).as_str(),
            "http://h:10000/api/v0/resources"
        );
        let (_, url) = server_url("https://h/staging/").unwrap();
        assert_eq!(
            api::resources_url(&url).as_str(),
            "https://h/staging/api/v0/resources"
        );
        for bad in [
            "ftp://h",
            "http://u:p@h",
            "http://h/?a=b",
            "h:10000",
            "not a url",
        ] {
            let e = server_url(bad).unwrap_err();
            assert!(matches!(e, UploadError::Usage(_)), "{bad}");
            assert!(e.to_string().contains("--server"), "{e}");
        }
    }

    #[test]
    fn label_syntax() {
        let ok = labels(&["a=b".into(), "example.com/app=x-1".into(), "e=".into()]).unwrap();
        assert_eq!(ok.len(), 3);
        assert_eq!(ok["example.com/app"], "x-1");
        for bad in ["noequals", "=v", "a=b c", "a=-x", "Bad_Prefix/x=y", "k=v,"] {
            assert!(labels(&[bad.to_owned()]).is_err(), "{bad}");
        }
        assert!(labels(&["a=b".into(), "a=c".into()]).is_err());
        assert!(labels(&["a=b".into(), "a=b".into()]).is_ok());
    }

    #[test]
    fn entry_names() {
        assert!(entry_name_ok("app.jar").is_ok());
        assert!(entry_name_ok("ünï code ☃.properties").is_ok());
        assert!(entry_name_ok("c:evil").is_err());
        assert!(entry_name_ok(".spark-localizer-x").is_err());
        assert!(entry_name_ok("classpath").is_err());
        assert!(entry_name_ok("spark-localizer-report.json").is_err());
        assert!(entry_name_ok("a\nb").is_err());
        assert!(entry_name_ok(&"x".repeat(201)).is_err());
    }
}

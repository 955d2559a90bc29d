//! Turns declared URIs into a validated plan: where every artifact goes, under
//! which name, with which pin. Every problem is found here, before any network
//! traffic, and all of them are reported at once.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use url::Url;

use crate::config::{Declared, Settings};
use crate::layout::check_name;

use self::locator::Located;

mod globs;
mod locator;
#[cfg(test)]
mod props;
use crate::origin::Origin;
use crate::source::Scheme;

/// Whether an artifact goes on the classpath (a jar) or only into the files dir.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    Jar,
    File,
    /// Fetched, then unpacked into `<files-dir>/<name>` (or copied as is when its
    /// format is unknown, as Spark does).
    Archive,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Jar => "jar",
            Kind::File => "file",
            Kind::Archive => "archive",
        })
    }
}

/// Where an artifact ends up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// Fetched into `dir` as `dir/name`; `real_dir` is where `dir` really leads
    /// (symlinks and `..` resolved): one lock and one cleanup per real directory.
    Fetch {
        dir: PathBuf,
        path: PathBuf,
        real_dir: PathBuf,
    },
    /// `local://`: already in the image at `path`; not fetched.
    Local { path: PathBuf },
}

/// One artifact of the plan.
#[derive(Debug, Clone)]
pub(crate) struct Artifact {
    pub kind: Kind,
    /// The URI to fetch (fragment removed; userinfo kept for the source to use).
    pub uri: Url,
    /// The URI as it may be shown: secrets redacted.
    pub display_uri: String,
    pub scheme: Scheme,
    /// Destination file name (`#alias` or the last path segment).
    pub name: String,
    pub target: Target,
    /// The pinned sha256, if any.
    pub pin: Option<[u8; 32]>,
    /// The sha1 a Maven repository publishes for a `--packages` jar, if any.
    pub sha1: Option<[u8; 20]>,
    pub origin: Origin,
    /// For an archive of a known format: how and where it is unpacked. The fetched
    /// archive itself is kept in the state directory (`target`).
    pub unpack: Option<Unpack>,
    /// For a layer of an `oci://` reference: what the reference resolved to.
    pub oci: Option<crate::oci::Pinned>,
}

/// Where an archive is unpacked.
#[derive(Debug, Clone)]
pub(crate) struct Unpack {
    pub format: crate::archive::Format,
    /// `<files-dir>/<name>`: appears only complete, replaced atomically. For a
    /// staging bundle, the jars or files directory itself.
    pub into: PathBuf,
    /// A staging bundle: its files are published one by one at the top of `into`
    /// (as the original init container did), not as a tree under a name.
    pub flat: bool,
    /// A layer of a `bundle` image: what is published at `into` is this path
    /// of the layer (a file or a tree), and the layer holds nothing else.
    pub strip: Option<PathBuf>,
}

impl Artifact {
    /// The path this artifact claims: what users see of it (the unpacked directory
    /// of an archive, else its path); a staging bundle claims only where it is kept.
    pub(crate) fn claimed(&self) -> &Path {
        match &self.unpack {
            Some(u) if !u.flat => &u.into,
            _ => self.target.path(),
        }
    }

    /// What identifies the artifact in state records: the URI without userinfo; for
    /// a staging bundle its `staging://<id>`, whatever the server's address, so a
    /// bundle kept from an earlier run is kept when the server is reached otherwise.
    pub(crate) fn record_key(&self) -> String {
        match Url::parse(&self.display_uri) {
            Ok(id) if self.is_bundle() => crate::layout::uri_digest(&id),
            _ => crate::layout::uri_digest(&self.uri),
        }
    }

    /// Whether this is a staging bundle (unpacked flat).
    pub(crate) fn is_bundle(&self) -> bool {
        self.unpack.as_ref().is_some_and(|u| u.flat)
    }

    /// What users see of it: the unpacked directory of an archive, else its path.
    pub(crate) fn visible(&self) -> &Path {
        match &self.unpack {
            Some(u) => &u.into,
            None => self.target.path(),
        }
    }
}

impl Target {
    /// The artifact's path: where it is published, or where the image has it.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Target::Fetch { path, .. } | Target::Local { path } => path,
        }
    }
}

/// The validated plan, in declared order (jars first, then files).
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub artifacts: Vec<Artifact>,
    /// The configured destination directories (jars, files), fetched into or not.
    pub dirs: Vec<PathBuf>,
    /// Keys of `--checksums` that no artifact matched.
    pub unused_pins: Vec<String>,
    /// Files spark-localizer writes itself (where they really lead), with the flag
    /// naming each: a staging bundle's files may not take them either.
    pub reserved: Vec<(PathBuf, &'static str)>,
}

/// Every problem found in the declared inputs, and the plan of the inputs that
/// are valid (so that the sources can still be configured for them, and their
/// problems reported in the same run).
#[derive(Debug)]
pub(crate) struct PlanError {
    pub problems: Vec<String>,
    pub partial: Plan,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            f.write_str(p)?;
        }
        Ok(())
    }
}

impl std::error::Error for PlanError {}

/// Paths spark-localizer writes itself, which artifacts may not take, with the flag naming each.
fn reserved_paths(settings: &Settings) -> Vec<(&PathBuf, &'static str)> {
    let mut paths = vec![
        (&settings.classpath_file, "--classpath-file"),
        (&settings.env_file, "--env-file"),
        (&settings.report, "--report"),
    ];
    if let Some(sbom) = &settings.sbom {
        paths.push((sbom, "--sbom"));
    }
    if let Some(log) = &settings.termination_log {
        paths.push((log, "--termination-log"));
    }
    paths
}

/// Where `path` really leads: its longest existing prefix canonicalized
/// (symlinks and `..` resolved by the filesystem), the rest applied lexically
/// (directories that do not exist yet are created as real directories).
pub(crate) fn resolved(path: &Path) -> PathBuf {
    use std::path::Component;
    let parts: Vec<Component> = path.components().collect();
    for cut in (1..=parts.len()).rev() {
        let prefix: PathBuf = parts[..cut].iter().collect();
        if let Ok(mut real) = prefix.canonicalize() {
            for part in &parts[cut..] {
                match part {
                    Component::ParentDir => {
                        real.pop();
                    }
                    Component::Normal(name) => real.push(name),
                    _ => {}
                }
            }
            return real;
        }
    }
    path.to_owned()
}

/// Builds the plan from resolved settings.
pub(crate) fn build(settings: &Settings) -> Result<Plan, PlanError> {
    let mut problems = Vec::new();
    let mut artifacts: Vec<Artifact> = Vec::new();
    let lists = [
        (Kind::Jar, &settings.jars, &settings.jars_dir.value),
        (Kind::File, &settings.files, &settings.files_dir.value),
        (Kind::Archive, &settings.archives, &settings.files_dir.value),
    ];
    let pins = UrlPins::new(settings);
    let placeholder = Url::parse("http://staging.invalid/").expect("a valid URL");
    let mut matched_pins = std::collections::HashSet::new();
    // Display URIs of the artifacts nothing the user trusts pins.
    let mut unpinned = Vec::new();
    let mut twice = Vec::new();
    for (kind, declared, dir) in lists {
        let real_dir = resolved(dir);
        let declared = globs::expand(declared, &mut problems);
        for d in &declared {
            // An invalid --staging-uri is reported on its own: plan against a stand-in.
            let staging = settings
                .staging
                .uri
                .as_ref()
                .map(|u| &u.value)
                .or(settings.staging.uri_invalid.then_some(&placeholder));
            match artifact(kind, d, dir, &real_dir, staging) {
                Ok(mut a) => {
                    // An oci:// layer is named (and pinned) as REFERENCE#TITLE.
                    if let Some(layer) = settings.oci.layers.get(&d.uri) {
                        a.display_uri = layer.display_uri.clone();
                    }
                    // local:// files are in the image: checked in place when pinned.
                    let found = pins_of(&pins, &d.uri, &a);
                    let mut pinned = !found.is_empty();
                    if let Some((first, digest)) = found.first() {
                        a.pin = Some(*digest);
                        // Every key that pins it is used; two digests for one
                        // artifact are a mistake in the pins.
                        if let Some((other, _)) = found.iter().find(|(_, d)| d != digest) {
                            twice.push(format!(
                                "{} is pinned to two digests, by {} and by {}: keep one",
                                a.display_uri,
                                crate::util::redact::redact_url(first),
                                crate::util::redact::redact_url(other)
                            ));
                        }
                    }
                    matched_pins.extend(found.into_iter().map(|(key, _)| key));
                    pinned |= pin_signed(&mut a, settings.signed_pins.get(&d.uri), &mut twice);
                    if let Some(layer) = settings.oci.layers.get(&d.uri) {
                        pin_layer(&mut a, layer);
                        // A tag's layer digests are only what the tag names today.
                        pinned |= layer.reference.contains("@sha256:");
                    }
                    if !pinned {
                        unpinned.push(format!("{} ({})", a.display_uri, d.origin));
                    }
                    a.sha1 = settings.sha1_pins.get(&d.uri).copied();
                    artifacts.push(a);
                }
                Err(reason) => problems.push(format!("invalid {}: {reason}", d.origin)),
            }
        }
    }

    let reserved = check_destinations(settings, &artifacts, &mut problems);
    let mut dirs = vec![settings.jars_dir.value.clone()];
    if settings.files_dir.value != settings.jars_dir.value {
        dirs.push(settings.files_dir.value.clone());
    }
    let unused_pins: Vec<String> = settings
        .checksums
        .iter()
        .flat_map(|pins| pins.value.keys())
        .filter(|key| !matched_pins.contains(*key))
        .map(str::to_owned)
        .collect();
    if settings.require_pins {
        // Pins of oci:// layers and of packages' jars are judged once those are
        // known: not on a plan made without them (another problem stopped it).
        let strays = if unresolved(settings) {
            &[][..]
        } else {
            &unused_pins[..]
        };
        require_pins(&unpinned, strays, &mut problems);
        listed(
            &twice,
            |t| format!("--require-pins: {t}"),
            |more| format!("--require-pins: and {more} more artifacts pinned to two digests"),
            &mut problems,
        );
    } else {
        for t in twice {
            tracing::warn!("--checksums: {t}; the first applies");
        }
    }
    let plan = Plan {
        reserved: reserved
            .iter()
            .map(|(real, _, flag)| (real.clone(), *flag))
            .collect(),
        artifacts,
        dirs,
        unused_pins,
    };
    if problems.is_empty() {
        Ok(plan)
    } else {
        Err(PlanError {
            problems,
            partial: plan,
        })
    }
}

/// A `--packages` jar whose signature was checked (`--verify-signatures`) is pinned to
/// the bytes checked; another pin for it is a mistake said in `twice`.
fn pin_signed(a: &mut Artifact, signed: Option<&[u8; 32]>, twice: &mut Vec<String>) -> bool {
    let Some(signed) = signed else {
        return false;
    };
    if a.pin.is_some_and(|p| p != *signed) {
        twice.push(format!(
            "{} is pinned to another digest than the one whose signature was checked: keep one",
            a.display_uri
        ));
    }
    a.pin = Some(*signed);
    true
}

/// How many of each kind of `--require-pins` problem are listed one by one.
const LISTED: usize = 20;

/// `--require-pins`: every artifact pinned, every pin used.
fn require_pins(unpinned: &[String], unused: &[String], problems: &mut Vec<String>) {
    listed(
        unpinned,
        |shown| {
            format!(
            "--require-pins: {shown} is not pinned: add its sha256 to --checksums (`sha256sum` output, keyed by its name or URI), fetch a lock written by `spark-localizer resolve --lock`, or name the oci:// image by digest"
        )
        },
        |more| format!("--require-pins: and {more} more artifacts not pinned"),
        problems,
    );
    listed(
        unused,
        |key| {
            format!(
            "--require-pins: the pin of {} matches no artifact: remove it, or correct its name or URI",
            crate::util::redact::redact_url(key)
        )
        },
        |more| format!("--require-pins: and {more} more pins that match no artifact"),
        problems,
    );
}

/// The first [`LISTED`] of `items` as problems, then how many more.
fn listed(
    items: &[String],
    one: impl Fn(&str) -> String,
    more: impl Fn(usize) -> String,
    problems: &mut Vec<String>,
) {
    problems.extend(items.iter().take(LISTED).map(|i| one(i)));
    if items.len() > LISTED {
        problems.push(more(items.len() - LISTED));
    }
}

/// Whether the settings still hold `oci://` references or packages that were
/// not resolved into artifacts (planning stopped before them).
fn unresolved(settings: &Settings) -> bool {
    let declared = || {
        [&settings.jars, &settings.files, &settings.archives]
            .into_iter()
            .flatten()
    };
    let oci =
        declared().any(|d| crate::oci::is_oci(&d.uri) && !settings.oci.layers.contains_key(&d.uri));
    let packages = settings.packages.request.is_some()
        && settings.packages.lock.is_none()
        && !declared().any(|d| d.origin == settings.packages.origin);
    oci || packages
}

/// Checks where the artifacts go, and returns the reserved paths (the tool's own
/// output files) by where they really lead: no artifact overwrites an output file,
/// replaces a destination directory, or shares a path, or a name in one
/// directory, with another; the jars directory can be on the classpath.
fn check_destinations<'a>(
    settings: &'a Settings,
    artifacts: &[Artifact],
    problems: &mut Vec<String>,
) -> Vec<(PathBuf, &'a PathBuf, &'static str)> {
    // Compare where paths really lead (symlinks, `..`), not how they are spelled.
    let reserved: Vec<(PathBuf, &PathBuf, &str)> = reserved_paths(settings)
        .into_iter()
        .map(|(p, flag)| (resolved(p), p, flag))
        .collect();
    for (i, (real, path, flag)) in reserved.iter().enumerate() {
        if let Some((_, other, other_flag)) = reserved[..i].iter().find(|(r, _, _)| r == real) {
            problems.push(format!(
                "{flag} {} and {other_flag} {} are the same file; point them at different files",
                path.display(),
                other.display()
            ));
        }
    }
    // An artifact replaces what is at its path: never a destination directory.
    let dest_dirs = [
        (&settings.jars_dir.value, "--jars-dir"),
        (&settings.files_dir.value, "--files-dir"),
    ]
    .map(|(dir, flag)| (resolved(dir), dir, flag));
    let mut seen: HashMap<PathBuf, &Artifact> = HashMap::new();
    // State records, markers and kept archives go by name in each real directory.
    let mut names: HashMap<(&Path, &str), &Artifact> = HashMap::new();
    for a in artifacts {
        let Target::Fetch { real_dir, .. } = &a.target else {
            continue;
        };
        let path = a.claimed();
        let real = resolved(path);
        if let Some((_, _, flag)) = reserved.iter().find(|(r, _, _)| *r == real) {
            problems.push(format!(
                "invalid {}: {} would overwrite {}, the file named by {flag}; give the artifact another name with #alias or point {flag} elsewhere",
                a.origin,
                a.display_uri,
                path.display()
            ));
        }
        if let Some((_, dir, flag)) = dest_dirs.iter().find(|(d, _, _)| d.starts_with(&real)) {
            problems.push(format!(
                "invalid {}: {} would replace {}, which holds {flag} {}; give the artifact another name with #alias or point {flag} elsewhere",
                a.origin,
                a.display_uri,
                path.display(),
                dir.display()
            ));
        }
        if let Some(first) = seen.get(&real) {
            let fix = collision_fix(a, first);
            problems.push(format!(
                "invalid {}: {} and {} both go to {}; {fix}",
                a.origin,
                first.display_uri,
                a.display_uri,
                path.display(),
            ));
        } else if let Some(first) = names.get(&(real_dir.as_path(), a.name.as_str())) {
            problems.push(format!(
                "invalid {}: {} and {} both take the name '{}' in {} (staging://<id> keeps its archive as staging-<id>.tar.gz); give the one that is not a staging bundle another name with #alias",
                a.origin,
                first.display_uri,
                a.display_uri,
                a.name.escape_debug(),
                real_dir.display(),
            ));
        }
        seen.entry(real).or_insert(a);
        names.entry((real_dir, &a.name)).or_insert(a);
    }
    reserved
}

/// What to do about two artifacts going to one file: an `#alias` on one that
/// can take it (an oci:// layer keeps its title: its #FILE selects, it does
/// not rename).
fn collision_fix(a: &Artifact, first: &Artifact) -> String {
    let example = |x: &Artifact| {
        format!(
            "{}#other-{}",
            x.display_uri.split('#').next().unwrap_or(&x.display_uri),
            x.name
        )
    };
    match (a.oci.is_none(), first.oci.is_none()) {
        (true, _) => format!(
            "give one a different name with #alias (e.g. {})",
            example(a)
        ),
        (false, true) => format!(
            "give {} a different name with #alias (e.g. {})",
            first.display_uri,
            example(first)
        ),
        (false, false) => "an oci:// layer keeps its title (#FILE selects a layer, it does not rename it): push one under another title, or fetch one with --files into the other directory".to_owned(),
    }
}

/// The pins of `--checksums`, with URI keys also indexed in normalized form
/// (scheme and host case, default ports, no fragment), so that spellings of
/// one URI match.
struct UrlPins<'a> {
    pins: Option<&'a crate::config::checksums::Checksums>,
    normalized: HashMap<String, Vec<&'a str>>,
}

impl<'a> UrlPins<'a> {
    fn new(settings: &'a Settings) -> Self {
        let pins = settings.checksums.as_ref().map(|c| &c.value);
        let mut normalized: HashMap<String, Vec<&str>> = HashMap::new();
        // `file:/path` as Spark writes it is a URI key too.
        for key in pins.into_iter().flat_map(|p| p.keys()) {
            if let Some(url) = key.contains(':').then(|| Url::parse(key).ok()).flatten() {
                normalized.entry(normalize(&url)).or_default().push(key);
            }
        }
        UrlPins { pins, normalized }
    }
}

/// A URL as pins compare it: parsed (lower-case scheme and host, no default
/// port) and without its fragment.
fn normalize(url: &Url) -> String {
    let mut url = url.clone();
    url.set_fragment(None);
    // Host names are case-insensitive whatever the scheme (the URL parser lowers
    // them only for http(s) and file).
    if let Some(host) = url.host_str().map(str::to_ascii_lowercase) {
        let _ = url.set_host(Some(&host));
    }
    // `local:/p` and `local:///p` are one path (the parser makes the
    // second form only for the schemes it knows, such as file:).
    if url.host_str().unwrap_or("").is_empty() && url.path().starts_with('/') {
        return format!("{}://{}", url.scheme(), &url[url::Position::BeforePath..]);
    }
    url.to_string()
}

/// Every pin of an artifact with the key that matched, the one that applies
/// first. URI keys win over name keys; a URI key may be spelled differently and
/// may leave out the userinfo (pins live in ConfigMaps, credentials do not).
fn pins_of(pins: &UrlPins, declared: &str, a: &Artifact) -> Vec<(String, [u8; 32])> {
    let Some(all) = pins.pins else {
        return Vec::new();
    };
    let mut found: Vec<(String, [u8; 32])> = Vec::new();
    let mut add = |key: &str, digest: [u8; 32]| {
        if !found.iter().any(|(k, _)| k == key) {
            found.push((key.to_owned(), digest));
        }
    };
    let mut bare = a.uri.clone();
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    // An oci:// layer is pinned as the report names it: REFERENCE#TITLE.
    if a.scheme == Scheme::Oci {
        let oci_key = all.lookup_key(&a.display_uri, "").or_else(|| {
            // The scheme and registry in any case; the rest (tag, title) exactly.
            let split = |u: &str| {
                let rest = u.get(6..)?;
                let at = rest.find('/')?;
                Some((u[..6 + at].to_ascii_lowercase(), rest[at..].to_owned()))
            };
            let wanted = split(&a.display_uri)?;
            all.keys()
                .find(|k| split(k).as_ref() == Some(&wanted))
                .and_then(|k| all.lookup_key(k, ""))
        });
        if let Some((key, digest)) = oci_key {
            add(key, digest);
        }
    }
    if let Some((key, digest)) = all.lookup_key(declared, "") {
        add(key, digest);
    }
    let mut spellings = vec![normalize(&a.uri), normalize(&bare)];
    if let Ok(mut url) = Url::parse(declared) {
        spellings.push(normalize(&url));
        let _ = url.set_username("");
        let _ = url.set_password(None);
        spellings.push(normalize(&url));
    }
    for spelling in &spellings {
        for key in pins.normalized.get(spelling).into_iter().flatten() {
            if let Some(digest) = all.lookup(key, "") {
                add(key, digest);
            }
        }
    }
    if let Some((key, digest)) = all.lookup_key("", &a.name) {
        add(key, digest);
    }
    found
}

/// A layer of an `oci://` reference: shown as the user wrote it, pinned to its
/// layer digest. A `--checksums` pin of it wins (the bytes must match it): one
/// that disagrees with the manifest is warned about, and fails the transfer
/// (exit 4) unless the registry's bytes match the pin after all.
fn pin_layer(a: &mut Artifact, layer: &crate::oci::Pinned) {
    match a.pin {
        Some(pin) if pin != layer.pin => tracing::warn!(
            uri = %layer.display_uri,
            "--checksums pins it to sha256 {}, but the registry's manifest names layer {}: the pin is kept and the transfer will fail on it",
            hex::encode(pin),
            layer.layer
        ),
        Some(_) => {}
        None => a.pin = Some(layer.pin),
    }
    a.display_uri = layer.display_uri.clone();
    a.oci = Some(layer.clone());
    // A bundle's layer is a gzip'd tar: kept in the state directory, what it
    // holds published under the layer's name.
    if let (Some(path), Target::Fetch { dir, real_dir, .. }) = (&layer.path, &a.target) {
        let (dir, real_dir) = (dir.clone(), real_dir.clone());
        // `jars/`: several jars, published one by one at the top of the directory.
        let flat = path.ends_with('/');
        a.unpack = Some(Unpack {
            format: crate::archive::Format::TarGz,
            into: if flat { dir.clone() } else { dir.join(&a.name) },
            flat,
            strip: Some(PathBuf::from(path.trim_end_matches('/'))),
        });
        a.target = Target::Fetch {
            path: crate::layout::archive_path(&dir, &a.name),
            dir,
            real_dir,
        };
    }
}

/// Validates one declared URI; the error names the (redacted) URI and what to do.
fn artifact(
    kind: Kind,
    declared: &Declared,
    dir: &Path,
    real_dir: &Path,
    staging: Option<&Url>,
) -> Result<Artifact, String> {
    let located = Located::parse(&declared.uri)?;
    if located.scheme == Scheme::Staging {
        return bundle(kind, declared, located, dir, real_dir, staging);
    }
    located.check_scheme()?;
    let (name, last) = destination_name(kind, &located)?;
    let target = if located.scheme == Scheme::Local {
        local_target(kind, &located)?
    } else {
        Target::Fetch {
            dir: dir.to_owned(),
            path: dir.join(&name),
            real_dir: real_dir.to_owned(),
        }
    };
    let (target, unpack) = archive_target(kind, &last, &name, target);
    Ok(Artifact {
        kind,
        uri: located.uri,
        display_uri: located.display_uri,
        scheme: located.scheme,
        name,
        target,
        pin: None,
        sha1: None,
        origin: declared.origin.clone(),
        unpack,
        oci: None,
    })
}

/// The destination file name (the `#alias`, else the last path segment) and the
/// last path segment, checked.
fn destination_name(kind: Kind, located: &Located) -> Result<(String, String), String> {
    let shown = &located.display_uri;
    let path = located.uri.path();
    if path.ends_with('/') {
        return Err(format!(
            "{shown} ends in '/', which names a directory; name a file"
        ));
    }
    let last = path.rsplit('/').next().unwrap_or_default();
    let last = percent_encoding::percent_decode_str(last)
        .decode_utf8_lossy()
        .into_owned();
    let (name, from_alias) = match &located.alias {
        Some(alias) => (alias.clone(), true),
        None => (last.clone(), false),
    };
    check_name(&name).map_err(|why| {
        if from_alias {
            format!("alias '#{}' of {shown} {why}", name.escape_debug())
        } else {
            format!(
                "{shown}: file name '{}' {why}; rename it with #alias",
                name.escape_debug()
            )
        }
    })?;
    if kind == Kind::Jar && name.contains(':') {
        return Err(format!(
            "{shown}: jar name '{}' contains ':', the classpath separator; rename it with #alias",
            name.escape_debug()
        ));
    }
    Ok((name, last))
}

/// `local:///absolute/path`: already in the image, listed in place.
fn local_target(kind: Kind, located: &Located) -> Result<Target, String> {
    let shown = &located.display_uri;
    let uri = &located.uri;
    let path = percent_encoding::percent_decode_str(uri.path())
        .decode_utf8_lossy()
        .into_owned();
    if uri.host_str().is_some_and(|h| !h.is_empty()) {
        return Err(format!(
            "{shown} has a host; write local:///absolute/path (three slashes)"
        ));
    }
    if !path.starts_with('/') {
        return Err(format!(
            "{shown} names a relative path; write local:///absolute/path"
        ));
    }
    if path.chars().any(char::is_control) {
        return Err(format!(
            "{shown}: the decoded path contains control characters (a percent-encoded newline, tab or NUL?)"
        ));
    }
    if kind == Kind::Jar && path.contains(':') {
        return Err(format!(
            "{shown}: the path contains ':', the classpath separator, so it cannot go on the classpath"
        ));
    }
    Ok(Target::Local {
        path: PathBuf::from(path),
    })
}

/// An archive of a known format is kept in the state directory and unpacked into
/// `<dir>/<name>`. Spark tells the format by the file name (not the alias); an
/// unknown format is copied as is, under its name, like a file.
fn archive_target(kind: Kind, last: &str, name: &str, target: Target) -> (Target, Option<Unpack>) {
    let format = (kind == Kind::Archive)
        .then(|| crate::archive::Format::detect(last))
        .flatten();
    match (format, target) {
        (Some(format), Target::Fetch { dir, real_dir, .. }) => (
            Target::Fetch {
                path: crate::layout::archive_path(&dir, name),
                dir: dir.clone(),
                real_dir,
            },
            Some(Unpack {
                format,
                into: dir.join(name),
                flat: false,
                strip: None,
            }),
        ),
        (_, target) => (target, None),
    }
}

/// A staging bundle `staging://<id>`: kept as `staging-<id>.tar.gz` in the state
/// directory, fetched from the server's resource URL, unpacked flat into `dir`.
fn bundle(
    kind: Kind,
    declared: &Declared,
    located: Located,
    dir: &Path,
    real_dir: &Path,
    staging: Option<&Url>,
) -> Result<Artifact, String> {
    use crate::stage::api::{check_id, resource_url};
    let Located {
        uri,
        display_uri: shown,
        alias,
        ..
    } = located;
    if kind == Kind::Archive {
        return Err(format!(
            "{shown}: a staging bundle is unpacked into the jars or files directory; give it in --jars or --files (or --staging-jars-id / --staging-files-id)"
        ));
    }
    let id = uri.host_str().unwrap_or_default();
    check_id(id)
        .map_err(|why| format!("{shown}: the resource id '{}' {why}", id.escape_debug()))?;
    let extra = !uri.username().is_empty()
        || uri.password().is_some()
        || uri.port().is_some()
        || !matches!(uri.path(), "" | "/")
        || uri.query().is_some()
        || alias.is_some();
    if extra {
        return Err(format!(
            "{shown}: write a staging bundle as staging://<resourceId>, nothing else (its files keep their own names)"
        ));
    }
    let Some(base) = staging else {
        return Err(format!(
            "{shown} needs the staging server's URL: --staging-uri (or spark.kubernetes.resourceStagingServer.internal.uri in the properties file)"
        ));
    };
    let name = format!("staging-{id}.tar.gz");
    Ok(Artifact {
        kind,
        uri: resource_url(base, id),
        display_uri: format!("staging://{id}"),
        scheme: Scheme::Staging,
        target: Target::Fetch {
            path: crate::layout::archive_path(dir, &name),
            dir: dir.to_owned(),
            real_dir: real_dir.to_owned(),
        },
        name,
        pin: None,
        sha1: None,
        origin: declared.origin.clone(),
        unpack: Some(Unpack {
            format: crate::archive::Format::TarGz,
            into: dir.to_owned(),
            flat: true,
            strip: None,
        }),
        oci: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(uri: &str) -> Result<Artifact, String> {
        let d = Declared {
            uri: uri.to_owned(),
            origin: Origin::Flag("jars"),
        };
        artifact(Kind::Jar, &d, Path::new("/d"), Path::new("/d"), None)
    }

    #[test]
    fn names_and_aliases() {
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("https://h/a/b.jar", Ok("b.jar")),
            ("https://h/a/b.jar#c.jar", Ok("c.jar")),
            ("https://h/a/b%20c.jar", Ok("b c.jar")),
            ("https://h/a/b.jar?x=1", Ok("b.jar")),
            ("file:///tmp/x.jar", Ok("x.jar")),
            ("local:///opt/x.jar", Ok("x.jar")),
            ("https://h/a/b.jar#..", Err("would leave")),
            ("https://h/a/b.jar#../x", Err("path separator")),
            ("https://h/a/b.jar#a/b", Err("path separator")),
            ("https://h/a/b.jar#", Err("is empty")),
            ("https://h/a/b.jar#a%0Ab", Err("control")),
            ("https://h/a/%2E%2E", Err("ends in '/'")),
            ("https://h/a/x%2F..", Err("path separator")),
            ("https://h/a/dir/", Err("ends in '/'")),
            ("https://h", Err("ends in '/'")),
            ("ftp://h/a.jar", Err("unsupported scheme 'ftp'")),
            ("/opt/x.jar", Err("no scheme")),
            ("https://h/a.jar#.spark-localizer.x", Err("reserved")),
            ("https://h/a:b.jar", Err("classpath separator")),
            ("https://h/a.jar#a:b.jar", Err("classpath separator")),
            ("local:///opt/a:b/x.jar", Err("classpath separator")),
            ("local:///opt/a%0Ab/x.jar", Err("control characters")),
            ("local:///opt/a%00/x.jar", Err("control characters")),
            ("file:/tmp/x.jar", Ok("x.jar")),
            ("local:/opt/x.jar", Ok("x.jar")),
            ("local:foo.jar", Err("relative path")),
            ("FILE:///tmp/y.jar", Ok("y.jar")),
            ("c:\\x.jar", Err("unsupported scheme 'c'")),
            ("file://otherhost/x.jar", Err("must be local")),
        ];
        for (uri, want) in cases {
            match (one(uri), want) {
                (Ok(a), Ok(name)) => assert_eq!(&a.name, name, "{uri}"),
                (Err(e), Err(part)) => assert!(e.contains(part), "{uri}: {e}"),
                (got, want) => panic!("{uri}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn resolved_follows_symlinks_and_dotdot_through_missing_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("jars")).unwrap();
        std::os::unix::fs::symlink(root.join("jars"), root.join("lnk")).unwrap();
        let want = root.join("jars/a.jar");
        for spelled in [
            "lnk/a.jar",
            "jars/./a.jar",
            "missing/../jars/a.jar",
            "lnk/../jars/a.jar",
            "jars/new/../a.jar",
        ] {
            assert_eq!(resolved(&root.join(spelled)), want, "{spelled}");
        }
        assert_eq!(resolved(&root.join("missing/x")), root.join("missing/x"));
    }

    #[test]
    fn unsupported_scheme_lists_supported() {
        let e = one("ftp://x/a.jar").unwrap_err();
        assert!(
            e.contains(
                "http, https, s3, s3a, gs, abfss, abfs, wasbs, wasb, hdfs, viewfs, file, local"
            ),
            "{e}"
        );
    }

    #[test]
    fn local_keeps_its_path() {
        let a = one("local:///opt/spark/jars/x.jar").unwrap();
        assert_eq!(
            a.target,
            Target::Local {
                path: "/opt/spark/jars/x.jar".into()
            }
        );
    }

    #[test]
    fn secrets_are_redacted_in_errors() {
        let e = one("ftp://user:hunter22@h/a.jar?sig=abcdef").unwrap_err();
        assert!(!e.contains("hunter22") && !e.contains("abcdef"), "{e}");
    }
}

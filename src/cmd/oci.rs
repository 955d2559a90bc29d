//! The resolution step of `oci://` references, before the plan (as `--packages`
//! is resolved): each reference becomes its manifest's digest (a tag is
//! resolved; an index narrowed to the running platform, else its first entry),
//! and one artifact per layer named by its `org.opencontainers.image.title`,
//! pinned to the layer digest. A tag an earlier run in the same place resolved
//! (its report) keeps that digest, so a rerun gets the same bytes.

use std::collections::HashMap;
use std::sync::Arc;

use tracing::{info, warn};

use crate::cmd::exit::ExitCode;
use crate::config::{Declared, Problems, Settings};
use crate::fault::{FaultKind, SourceError};
use crate::oci::auth::AuthFile;
use crate::oci::{is_oci, Pinned, Reference, Registry, Resolved};
use crate::retry::{Backoff, RetryPolicy};
use crate::source::oci::OciSource;
use crate::util::redact::redact_url;

/// Why resolution stopped the run: its exit code and message.
pub(crate) type Stopped = (ExitCode, String);

/// Which list a declared reference came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum List {
    Jars,
    Files,
    Archives,
}

/// Resolves every `oci://` URI of `settings` and puts its layers in its place;
/// returns the source fetching them. Invalid references and an unreadable
/// `--registry-auth` are configuration problems (no traffic then: the
/// references are dropped from the lists and the run stops on the problems).
pub(crate) async fn expand(
    settings: &mut Settings,
    problems: &mut Problems,
    plannable: bool,
    keep_going: bool,
    cancel: Option<&tokio::sync::watch::Receiver<bool>>,
) -> Result<Expanded, Stopped> {
    let mut refs: Vec<(List, usize, Reference)> = Vec::new();
    for (list, declared) in lists(settings) {
        for (i, d) in declared.iter().enumerate().filter(|(_, d)| is_oci(&d.uri)) {
            crate::util::redact::register_url_secrets(&d.uri);
            match Reference::parse(&d.uri) {
                Ok(r) => refs.push((list, i, r)),
                Err(why) => problems.push_message(format!(
                    "invalid {}: {}",
                    d.origin,
                    crate::util::redact::scrub(&why)
                )),
            }
        }
    }
    let any = lists(settings)
        .iter()
        .any(|(_, l)| l.iter().any(|d| is_oci(&d.uri)));
    if !any {
        return Ok(Expanded::default());
    }
    let auth = match &settings.oci.auth_file {
        Some((path, origin)) => AuthFile::load(path, origin.clone())
            .map_err(|why| problems.push_message(why))
            .ok(),
        None => None,
    };
    // A client that cannot be built is reported once, by the HTTP source.
    let client = crate::net::client(&settings.http).ok();
    let (Some(client), true) = (client, problems.is_empty() && plannable) else {
        for list in [
            &mut settings.jars,
            &mut settings.files,
            &mut settings.archives,
        ] {
            list.retain(|d| !is_oci(&d.uri));
        }
        return Ok(Expanded::default());
    };
    let registry = Arc::new(Registry::new(
        client,
        auth,
        settings.oci.insecure.clone(),
        settings.stall_timeout,
    ));
    let earlier = earlier_digests(&settings.report);
    let work = resolve_all(settings, &registry, &refs, &earlier);
    let (resolved, failures) =
        super::deadline::within_here(settings, cancel, &named(&refs), work).await?;
    // Every reference was tried: each failure named, the most severe wins
    // (`check` shows them and goes on with the rest).
    if !keep_going {
        if let Some(code) = failures.iter().map(|(c, _)| *c).reduce(ExitCode::worst) {
            let all: Vec<String> = failures.into_iter().map(|(_, m)| m).collect();
            return Err((code, all.join("; ")));
        }
    }
    let lines = describe(&registry, &refs, &resolved);
    let sizes = resolved
        .values()
        .flat_map(|r| &r.layers)
        .filter_map(|l| Some((l.digest.clone(), l.size?)))
        .collect();
    expand_lists(settings, refs, &resolved).map_err(|message| (ExitCode::Fetch, message))?;
    Ok(Expanded {
        source: Some(OciSource::new(registry, lines, sizes)),
        failures,
    })
}

/// What the resolution gives the run: the source of the layers, and (for
/// `check`, which goes on) the references that could not be resolved.
#[derive(Default)]
pub(crate) struct Expanded {
    pub source: Option<OciSource>,
    pub failures: Vec<Stopped>,
}

/// The references as the deadline's and a signal's messages name them.
fn named(refs: &[(List, usize, Reference)]) -> String {
    let mut names: Vec<String> = refs
        .iter()
        .map(|(_, _, r)| format!("oci://{}", r.name()))
        .collect();
    names.dedup();
    if names.len() > 3 {
        let more = names.len() - 3;
        names.truncate(3);
        names.push(format!("{more} more"));
    }
    names.join(", ")
}

fn lists(settings: &Settings) -> [(List, &Vec<Declared>); 3] {
    [
        (List::Jars, &settings.jars),
        (List::Files, &settings.files),
        (List::Archives, &settings.archives),
    ]
}

/// Resolves each distinct reference (with the run's retries), in order.
async fn resolve_all(
    settings: &Settings,
    registry: &Registry,
    refs: &[(List, usize, Reference)],
    earlier: &HashMap<String, String>,
) -> (HashMap<String, Resolved>, Vec<Stopped>) {
    let policy = RetryPolicy {
        retries: settings.retries,
        backoff: Backoff::new(settings.retry_delay),
    };
    let mut out: HashMap<String, Option<Resolved>> = HashMap::new();
    let mut failures: Vec<Stopped> = Vec::new();
    for (_, _, r) in refs {
        let name = r.name();
        if out.contains_key(&name) {
            continue;
        }
        let kept = earlier.get(&name).filter(|_| r.digest.is_none());
        let resolved = match kept {
            Some(digest) => {
                let mut pinned = r.clone();
                pinned.digest = Some(digest.clone());
                match with_retries(&policy, registry, &pinned).await {
                    Ok(resolved) => {
                        info!("oci://{name}: keeping {digest}, which the earlier run in this place resolved it to (its report)");
                        Ok(resolved)
                    }
                    Err(e) => {
                        warn!("oci://{name}: {digest} from the earlier run's report is gone ({}); resolving the tag again", e.describe());
                        with_retries(&policy, registry, r).await
                    }
                }
            }
            None => with_retries(&policy, registry, r).await,
        };
        let resolved = match resolved {
            Ok(resolved) => resolved,
            Err(e) => {
                // Every reference is tried: each failure named, the most severe wins.
                let code = if e.kind == FaultKind::Integrity {
                    ExitCode::Integrity
                } else {
                    ExitCode::Fetch
                };
                let message = format!("cannot resolve {}", why(&name, &e));
                failures.push((code, message));
                out.insert(name, None);
                continue;
            }
        };
        info!(
            "oci://{name} resolved to {}{}",
            resolved.digest,
            resolved
                .picked
                .as_deref()
                .map(|p| format!(" (index; picked {p})"))
                .unwrap_or_default()
        );
        out.insert(name, Some(resolved));
    }
    let resolved = out.into_iter().filter_map(|(k, v)| Some((k, v?))).collect();
    (resolved, failures)
}

/// What happened, the reference said once (the client's errors start with it).
fn why(name: &str, e: &SourceError) -> String {
    let text = e.describe();
    if text.starts_with("oci://") {
        text
    } else {
        format!("oci://{name}: {text}")
    }
}

async fn with_retries(
    policy: &RetryPolicy,
    registry: &Registry,
    r: &Reference,
) -> Result<Resolved, SourceError> {
    retrying(policy, &format!("oci://{}", r.name()), || {
        registry.resolve(r)
    })
    .await
}

/// `attempt` again on a transient failure, as `--retries` and `--retry-delay`
/// say (each retry logged as `what: why (retrying in …)`).
pub(crate) async fn retrying<T, F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    attempt: F,
) -> Result<T, SourceError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, SourceError>>,
{
    let mut tried = 1;
    loop {
        match attempt().await {
            Ok(done) => return Ok(done),
            Err(e) => match policy.next_delay(tried, &e) {
                Some(delay) => {
                    warn!("{what}: {} (retrying in {delay:?})", e.describe());
                    tokio::time::sleep(delay).await;
                    tried += 1;
                }
                None => return Err(e),
            },
        }
    }
}

/// The manifest digests a successful earlier run's report (at `--report`)
/// recorded for tag references, by reference.
fn earlier_digests(report: &std::path::Path) -> HashMap<String, String> {
    let Ok(text) = std::fs::read(report) else {
        return HashMap::new();
    };
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(&text) else {
        return HashMap::new();
    };
    // After a failed run the tag is resolved again: a fixed tag can heal the pod.
    if value["ok"] != serde_json::Value::Bool(true) {
        return HashMap::new();
    }
    let mut out = HashMap::new();
    for a in value["artifacts"].as_array().into_iter().flatten() {
        let (Some(reference), Some(digest)) =
            (a["oci"]["reference"].as_str(), a["oci"]["digest"].as_str())
        else {
            continue;
        };
        // Only a well-formed digest (the report is in a writable volume).
        if crate::oci::reference::check_digest(digest).is_err() {
            continue;
        }
        if let Ok(r) = Reference::parse(reference) {
            out.insert(r.name(), digest.to_owned());
        }
    }
    out
}

/// Replaces each reference in its list by its layers (in the manifest's
/// order); through `--jars`, layers not titled `*.jar` go to the files.
fn expand_lists(
    settings: &mut Settings,
    refs: Vec<(List, usize, Reference)>,
    resolved: &HashMap<String, Resolved>,
) -> Result<(), String> {
    let mut by_place: HashMap<usize, Vec<Declared>> = HashMap::new();
    let mut extra_files = Vec::new();
    for (list, i, r) in &refs {
        let declared = match list {
            List::Jars => &settings.jars[*i],
            List::Files => &settings.files[*i],
            List::Archives => &settings.archives[*i],
        };
        let origin = declared.origin.clone();
        let shown = redact_url(declared.uri.split('#').next().unwrap_or_default());
        // Not resolved (`check` goes on without it).
        let Some(res) = resolved.get(&r.name()) else {
            by_place.insert(key(*list, *i), Vec::new());
            continue;
        };
        let layers = match bundle_layers(&shown, r, res)? {
            Some(layers) if *list == List::Jars => layers,
            Some(_) => return Err(format!(
                "{shown} is an image made by `spark-localizer bundle`: give it in --jars (its jars/ go on the classpath, its files/ into --files-dir)"
            )),
            None => select(&shown, r, res)?
                .into_iter()
                .map(|(title, layer)| (title, None, layer))
                .collect(),
        };
        let mut here = Vec::new();
        for (title, path, layer) in layers {
            let pin = crate::oci::reference::check_digest(&layer.digest).map_err(|why| {
                format!("{shown}: layer {title} has digest '{}', which {why}; only sha256 layers can be verified", layer.digest)
            })?;
            let internal = format!(
                "oci://{}/{}@{}/{}",
                r.registry,
                r.repository,
                layer.digest,
                percent_encoding::utf8_percent_encode(&title, percent_encoding::NON_ALPHANUMERIC)
            );
            settings.oci.layers.insert(
                internal.clone(),
                Pinned {
                    reference: shown.clone(),
                    digest: res.digest.clone(),
                    platform_digest: res.picked.clone(),
                    layer: layer.digest.clone(),
                    display_uri: format!("{shown}#{title}"),
                    title: title.clone(),
                    path: path.clone(),
                    pin,
                },
            );
            let d = Declared {
                uri: internal,
                origin: origin.clone(),
            };
            let bundle_file = path.as_deref().is_some_and(|p| p.starts_with("files/"));
            if bundle_file || (path.is_none() && *list == List::Jars && !title.ends_with(".jar")) {
                extra_files.push(d);
            } else {
                here.push(d);
            }
        }
        by_place.insert(key(*list, *i), here);
    }
    for (list, target) in [
        (List::Jars, &mut settings.jars),
        (List::Files, &mut settings.files),
        (List::Archives, &mut settings.archives),
    ] {
        let old = std::mem::take(target);
        for (i, d) in old.into_iter().enumerate() {
            match by_place.remove(&key(list, i)) {
                Some(layers) => target.extend(layers),
                None => target.push(d),
            }
        }
    }
    settings.files.extend(extra_files);
    Ok(())
}

/// A position in one of the three lists, unique across them.
fn key(list: List, i: usize) -> usize {
    i * 3
        + match list {
            List::Jars => 0,
            List::Files => 1,
            List::Archives => 2,
        }
}

/// The layers a reference gives: those with a title (`#file`: the one with that
/// title). Untitled layers (an image's filesystem) are skipped with a warning;
/// none titled is an error saying how to push files.
fn select<'a>(
    shown: &str,
    r: &Reference,
    resolved: &'a Resolved,
) -> Result<Vec<(String, &'a crate::oci::manifest::Descriptor)>, String> {
    let titled: Vec<(String, &crate::oci::manifest::Descriptor)> = resolved
        .layers
        .iter()
        .filter_map(|l| l.title().map(|t| (t.to_owned(), l)))
        .collect();
    let untitled = resolved.layers.len() - titled.len();
    if titled.is_empty() {
        return Err(format!(
            "{shown} ({}) has no layer with an org.opencontainers.image.title annotation, so no file to localize; push files with `oras push REGISTRY/REPO:TAG app.jar:application/java-archive`",
            resolved.digest
        ));
    }
    let titles = || {
        titled
            .iter()
            .map(|(t, _)| t.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (t, _) in &titled {
        crate::layout::check_name(t).map_err(|why| {
            format!(
                "{shown}: the layer title '{}' {why}, so it cannot be a file name; push it under a plain file name",
                t.escape_debug()
            )
        })?;
    }
    if let Some(file) = &r.file {
        return titled
            .iter()
            .find(|(t, _)| t == file)
            .map(|(t, l)| vec![(t.clone(), *l)])
            .ok_or_else(|| {
                format!(
                    "{shown} has no layer titled '{file}' (#{file}); its layers are: {}",
                    titles()
                )
            });
    }
    if untitled > 0 {
        warn!("{shown}: skipping {untitled} layer(s) without an org.opencontainers.image.title annotation");
    }
    let mut seen = std::collections::HashSet::new();
    for (t, _) in &titled {
        if !seen.insert(t.as_str()) {
            return Err(format!("{shown} has two layers titled '{t}', which would both go to one file; push them with distinct titles"));
        }
    }
    Ok(titled)
}

/// A layer to localize: its file name, its path in a `bundle` image, and its descriptor.
type Selected<'a> = (String, Option<String>, &'a crate::oci::manifest::Descriptor);

/// The layers of an image `spark-localizer bundle` made (its layers name the
/// paths they hold): each `jars/<name>` and `files/<name>`, in the image's
/// order; its classpath layer is the run's own to write. `None` for any other
/// image or artifact.
fn bundle_layers<'a>(
    shown: &str,
    r: &Reference,
    resolved: &'a Resolved,
) -> Result<Option<Vec<Selected<'a>>>, String> {
    use crate::oci::image::{LAYER_PATH, OUTPUTS_PATH, WHITEOUT};
    if !resolved
        .layers
        .iter()
        .any(|l| l.annotations.contains_key(LAYER_PATH))
    {
        return Ok(None);
    }
    if let Some(file) = &r.file {
        return Err(format!(
            "{shown}#{file}: an image made by `spark-localizer bundle` is fetched whole; leave out #{file}"
        ));
    }
    let mut layers = Vec::new();
    for layer in &resolved.layers {
        let digest = crate::oci::reference::check_digest(&layer.digest).map_err(|why| {
            format!(
                "{shown}: a layer's digest '{}' {why}",
                layer.digest.escape_debug()
            )
        })?;
        let path = layer.annotations.get(LAYER_PATH).map(String::as_str);
        let parts = path.and_then(|p| p.split_once('/'));
        match (path, parts) {
            (Some(OUTPUTS_PATH), _) => continue,
            // Several jars (a bundle of more jars than layers): named by its digest.
            (Some("jars/"), _) => {
                let name = format!("layer-{}.tar.gz", hex::encode(&digest[..8]));
                layers.push((name, Some("jars/".to_owned()), layer));
            }
            (Some(path), Some(("jars" | "files", name)))
                if crate::layout::check_name(name).is_ok() && !name.starts_with(WHITEOUT) =>
            {
                layers.push((name.to_owned(), Some(path.to_owned()), layer));
            }
            _ => {
                return Err(format!(
                    "{shown}: layer {} holds '{}', which is not jars/<name> or files/<name>: is it an image `spark-localizer bundle` made?",
                    layer.digest.escape_debug(),
                    path.unwrap_or_default().escape_debug()
                ))
            }
        }
    }
    Ok(Some(layers))
}

/// What `check` shows: each registry's scheme and credential, each reference's
/// resolution.
fn describe(
    registry: &Registry,
    refs: &[(List, usize, Reference)],
    resolved: &HashMap<String, Resolved>,
) -> Vec<String> {
    let mut lines = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (_, _, r) in refs {
        if seen.insert(r.registry.clone()) {
            lines.push(format!(
                "  oci registry     {} ({})\n    credentials    {}",
                r.registry,
                if registry.is_insecure(&r.registry) {
                    "plain HTTP: --insecure-registry"
                } else {
                    "https"
                },
                registry.auth_source(&r.registry)
            ));
        }
    }
    let mut shown = std::collections::HashSet::new();
    for (_, _, r) in refs {
        let name = r.name();
        if let Some(res) = resolved.get(&name).filter(|_| shown.insert(name.clone())) {
            lines.push(format!(
                "  oci reference    oci://{name}\n    resolved to    {}{}",
                res.digest,
                res.picked
                    .as_deref()
                    .map(|p| format!(" (index; picked {p})"))
                    .unwrap_or_default()
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::manifest::Descriptor;

    fn layer(title: Option<&str>) -> Descriptor {
        Descriptor {
            digest: format!("sha256:{}", "a".repeat(64)),
            size: None,
            annotations: title
                .map(|t| (crate::oci::manifest::TITLE.to_owned(), t.to_owned()))
                .into_iter()
                .collect(),
            platform: None,
        }
    }

    #[test]
    fn select_keeps_titled_layers_and_says_what_is_wrong() {
        let resolved = |titles: &[Option<&str>]| Resolved {
            digest: "sha256:m".into(),
            picked: None,
            layers: titles.iter().map(|t| layer(*t)).collect(),
        };
        let titles = |r: &Resolved, raw: &str| {
            select(raw, &Reference::parse(raw).unwrap(), r)
                .map(|v| v.into_iter().map(|(t, _)| t).collect::<Vec<_>>())
        };
        let r = resolved(&[Some("a.jar"), None, Some("b.conf")]);
        assert_eq!(titles(&r, "oci://h/r:1").unwrap(), ["a.jar", "b.conf"]);
        assert_eq!(titles(&r, "oci://h/r:1#b.conf").unwrap(), ["b.conf"]);
        let cases = [
            (
                resolved(&[None, None]),
                "oci://h/r:1",
                "no layer with an org.opencontainers.image.title",
            ),
            (r, "oci://h/r:1#c.jar", "its layers are: a.jar, b.conf"),
            (
                resolved(&[Some("a.jar"), Some("a.jar")]),
                "oci://h/r:1",
                "two layers titled 'a.jar'",
            ),
            (
                resolved(&[Some("../x.jar")]),
                "oci://h/r:1",
                "cannot be a file name",
            ),
            (
                resolved(&[Some("")]),
                "oci://h/r:1",
                "cannot be a file name",
            ),
        ];
        for (r, raw, part) in cases {
            let e = titles(&r, raw).unwrap_err();
            assert!(e.contains(part), "{raw}: {e}");
        }
    }
}

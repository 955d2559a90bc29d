//! The part of an Ivy settings file (`spark.jars.ivySettings`) users write for
//! `--packages`: `<ibiblio>` resolvers and `<url>` resolvers with an
//! m2-compatible pattern, `<chain>`s of them, the `defaultResolver`,
//! `<credentials>` per host, and `<property>` values (`${name}`, `${env.NAME}`).
//! Anything else is refused naming the element: a resolver that silently did
//! nothing would send users back to Maven Central on a closed network.

use std::collections::HashMap;
use std::path::Path;

use super::repo::Repo;

/// The repositories of the settings' default resolver, in order.
pub(crate) fn load(path: &Path) -> Result<Vec<Repo>, String> {
    let text =
        crate::util::fs::read_config_text(path).map_err(|e| format!("cannot read it: {e}"))?;
    parse(&text)
}

pub(crate) fn parse(text: &str) -> Result<Vec<Repo>, String> {
    let doc = roxmltree::Document::parse(text).map_err(|e| format!("not well-formed XML: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "ivysettings" {
        return Err(format!(
            "the root element is <{}>, not <ivysettings>",
            root.tag_name().name()
        ));
    }
    let line = |n: roxmltree::Node<'_, '_>| doc.text_pos_at(n.range().start).row;
    let mut props: HashMap<String, String> = HashMap::new();
    let mut credentials: HashMap<String, (String, String)> = HashMap::new();
    let mut default = None;
    let mut resolvers: Vec<roxmltree::Node<'_, '_>> = Vec::new();
    for node in root.children().filter(|n| n.is_element()) {
        match node.tag_name().name() {
            "property" => {
                if let (Some(name), Some(value)) = (node.attribute("name"), node.attribute("value"))
                {
                    let value = expand(value, &props)?;
                    props.entry(name.to_owned()).or_insert(value);
                }
            }
            "settings" => default = node.attribute("defaultResolver").map(str::to_owned),
            "credentials" => {
                let (Some(host), Some(user)) = (node.attribute("host"), node.attribute("username"))
                else {
                    return Err(format!(
                        "<credentials> (line {}) needs host and username",
                        line(node)
                    ));
                };
                let password = expand(node.attribute("passwd").unwrap_or_default(), &props)?;
                crate::util::redact::register_secret(&password);
                credentials.insert(expand(host, &props)?, (expand(user, &props)?, password));
            }
            "resolvers" => resolvers.extend(node.children().filter(|n| n.is_element())),
            // Caches, modules, conflict managers, version matchers: Ivy's own
            // business, not where to fetch from.
            "caches" | "modules" | "conflict-managers" | "version-matchers" | "include"
            | "typedef" | "namespaces" | "macrodef" | "triggers" | "lock-strategies" => {
                if node.tag_name().name() == "include" {
                    return Err(format!(
                        "<include> (line {}) is not supported: put the resolvers in this file",
                        line(node)
                    ));
                }
            }
            other => {
                return Err(format!("<{other}> (line {}) is not supported", line(node)));
            }
        }
    }
    let by_name: HashMap<&str, roxmltree::Node<'_, '_>> = resolvers
        .iter()
        .filter_map(|n| Some((n.attribute("name")?, *n)))
        .collect();
    let start = match &default {
        Some(name) => *by_name
            .get(name.as_str())
            .ok_or_else(|| format!("defaultResolver \"{name}\" names no resolver"))?,
        None => *resolvers
            .first()
            .ok_or_else(|| "no <resolvers>: give at least one <ibiblio> resolver".to_owned())?,
    };
    let mut out = Vec::new();
    flatten(start, &by_name, &props, &credentials, &line, &mut out, 0)?;
    if out.is_empty() {
        return Err("the default resolver has no repository".into());
    }
    Ok(out)
}

fn flatten<'a>(
    node: roxmltree::Node<'a, '_>,
    by_name: &HashMap<&str, roxmltree::Node<'a, '_>>,
    props: &HashMap<String, String>,
    credentials: &HashMap<String, (String, String)>,
    line: &dyn Fn(roxmltree::Node<'_, '_>) -> u32,
    out: &mut Vec<Repo>,
    depth: usize,
) -> Result<(), String> {
    if depth > 16 {
        return Err("resolvers nest more than 16 deep (a chain that contains itself?)".into());
    }
    let name = node.tag_name().name();
    let at = line(node);
    match name {
        "chain" => {
            for child in node.children().filter(|n| n.is_element()) {
                flatten(child, by_name, props, credentials, line, out, depth + 1)?;
            }
        }
        "resolver" => {
            let target = node
                .attribute("ref")
                .and_then(|r| by_name.get(r))
                .ok_or_else(|| format!("<resolver> (line {at}) names no resolver with ref"))?;
            flatten(*target, by_name, props, credentials, line, out, depth + 1)?;
        }
        "ibiblio" => {
            if node.attribute("m2compatible") != Some("true") {
                return Err(format!(
                    "<ibiblio> (line {at}) without m2compatible=\"true\" is not supported (a Maven 1 layout)"
                ));
            }
            let root = node
                .attribute("root")
                .map(|r| expand(r, props))
                .transpose()?
                .unwrap_or_else(|| super::MAVEN_CENTRAL.to_owned());
            out.push(repo(&root, credentials).map_err(|e| format!("<ibiblio> (line {at}): {e}"))?);
        }
        "url" => {
            let pattern = node
                .children()
                .find(|n| n.is_element() && n.tag_name().name() == "artifact")
                .and_then(|n| n.attribute("pattern"))
                .ok_or_else(|| format!("<url> (line {at}) has no <artifact pattern=…>"))?;
            let pattern = expand(pattern, props)?;
            let root = pattern
                .split_once("[organisation]")
                .filter(|(_, rest)| rest.starts_with("/[module]/[revision]/"))
                .map(|(root, _)| root.to_owned())
                .filter(|_| node.attribute("m2compatible") == Some("true"))
                .ok_or_else(|| {
                    format!(
                        "<url> (line {at}) is not an m2-compatible repository (m2compatible=\"true\" and a pattern ROOT/[organisation]/[module]/[revision]/…)"
                    )
                })?;
            out.push(repo(&root, credentials).map_err(|e| format!("<url> (line {at}): {e}"))?);
        }
        other => {
            return Err(format!(
                "<{other}> (line {at}) is not supported: spark-localizer reads <ibiblio m2compatible=\"true\">, m2-compatible <url> and <chain> resolvers"
            ))
        }
    }
    Ok(())
}

/// A repository at `root`, with the credentials given for its host.
fn repo(root: &str, credentials: &HashMap<String, (String, String)>) -> Result<Repo, String> {
    let mut repo = Repo::new(root)?;
    if let Some((user, password)) = repo.root.host_str().and_then(|h| credentials.get(h)) {
        let _ = repo.root.set_username(user);
        let _ = repo.root.set_password(Some(password));
    }
    Ok(repo)
}

/// `${name}` from the file's properties, `${env.NAME}` from the environment.
fn expand(value: &str, props: &HashMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let len = rest[start..]
            .find('}')
            .ok_or_else(|| format!("'{value}' has an unclosed ${{"))?;
        let name = &rest[start + 2..start + len];
        let found = match name.strip_prefix("env.") {
            Some(var) => std::env::var(var).ok(),
            None => props.get(name).cloned(),
        };
        out.push_str(&found.ok_or_else(|| format!("'{value}': ${{{name}}} is not set"))?);
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_ibiblio_url_and_credentials() {
        let text = r#"<ivysettings>
  <property name="repo.host" value="artifactory.corp"/>
  <settings defaultResolver="main"/>
  <credentials host="artifactory.corp" realm="Artifactory" username="ci" passwd="s3cret"/>
  <caches useOrigin="true"/>
  <resolvers>
    <chain name="main">
      <ibiblio name="corp" m2compatible="true" root="https://${repo.host}/maven-remote/"/>
      <url name="other" m2compatible="true">
        <artifact pattern="https://mirror.corp/m2/[organisation]/[module]/[revision]/[artifact]-[revision](-[classifier]).[ext]"/>
      </url>
      <resolver ref="extra"/>
    </chain>
    <ibiblio name="extra" m2compatible="true" root="http://127.0.0.1:8081/repo"/>
  </resolvers>
</ivysettings>"#;
        let repos = parse(text).unwrap();
        let roots: Vec<String> = repos.iter().map(Repo::shown).collect();
        assert_eq!(
            roots,
            vec![
                "https://***@artifactory.corp/maven-remote/",
                "https://mirror.corp/m2/",
                "http://127.0.0.1:8081/repo/"
            ]
        );
        assert_eq!(repos[0].root.password(), Some("s3cret"));
    }

    #[test]
    fn unsupported_settings_are_named() {
        for (text, needle) in [
            (
                r#"<ivysettings><resolvers><filesystem name="f"/></resolvers></ivysettings>"#,
                "<filesystem> (line 1) is not supported",
            ),
            (
                r#"<ivysettings><resolvers><ibiblio name="c"/></resolvers></ivysettings>"#,
                "m2compatible",
            ),
            (
                r#"<ivysettings><settings defaultResolver="x"/><resolvers><ibiblio name="c" m2compatible="true"/></resolvers></ivysettings>"#,
                "names no resolver",
            ),
            (
                r#"<ivysettings><include file="other.xml"/></ivysettings>"#,
                "<include>",
            ),
            (r#"<settings/>"#, "<ivysettings>"),
            (
                r#"<ivysettings><resolvers><ibiblio name="c" m2compatible="true" root="${nope}"/></resolvers></ivysettings>"#,
                "${nope} is not set",
            ),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
    }
}

//! The generated reference pages, `docs/reference/cli.md` (every subcommand and flag,
//! from clap) and `docs/reference/environment.md` (every environment variable: the
//! flags' twins from clap, the others from the documented constants of
//! `src/env_vars.rs`). The tests fail when a committed page differs from what the
//! code says; `SPARK_LOCALIZER_UPDATE_REFERENCE=1 cargo test --lib reference`
//! rewrites them.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::CommandFactory;

use crate::cli::Cli;

/// The variable that makes the tests rewrite the pages instead of comparing.
const UPDATE: &str = "SPARK_LOCALIZER_UPDATE_REFERENCE";

/// The command line as clap completes it (value counts, propagated globals).
fn built() -> clap::Command {
    let mut command = Cli::command();
    command.build();
    command
}

/// Every subcommand that runs something, with its path (`stage serve`).
fn leaf_commands() -> Vec<(String, clap::Command)> {
    fn walk(prefix: &str, command: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
        for sub in command.get_subcommands() {
            let path = format!("{prefix}{}", sub.get_name()).trim().to_owned();
            if sub.has_subcommands() {
                walk(&format!("{path} "), sub, out);
            } else {
                out.push((path, sub.clone()));
            }
        }
    }
    let mut out = Vec::new();
    walk("", &built(), &mut out);
    out
}

/// One line of help: clap's help text with newlines folded, pipes escaped.
fn one_line(text: Option<&clap::builder::StyledStr>) -> String {
    text.map(|t| t.to_string())
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// How a flag is written: `--name <VALUE>`, `--name` for a switch, `<NAME>...` for a
/// positional argument.
fn flag_spelling(arg: &clap::Arg) -> String {
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values())
        && !matches!(
            arg.get_action(),
            clap::ArgAction::SetTrue | clap::ArgAction::SetFalse | clap::ArgAction::Count
        );
    let value = arg
        .get_value_names()
        .and_then(|names| names.first().map(|n| n.to_string()))
        .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
    match (arg.get_long(), arg.get_short()) {
        (Some(long), short) => {
            let short = short.map(|s| format!("-{s}, ")).unwrap_or_default();
            if takes_value {
                format!("{short}--{long} <{value}>")
            } else {
                format!("{short}--{long}")
            }
        }
        (None, Some(short)) => format!("-{short}"),
        (None, None) => format!("<{value}>..."),
    }
}

fn defaults(arg: &clap::Arg) -> String {
    let values: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if values.is_empty() {
        String::new()
    } else {
        format!("`{}`", values.join(","))
    }
}

fn visible_args(command: &clap::Command) -> impl Iterator<Item = &clap::Arg> {
    command
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
}

/// One row per visible flag of `command`: spelling, env twin, default, help.
fn flag_table(page: &mut String, command: &clap::Command) {
    page.push_str("| flag | env | default | what |\n|---|---|---|---|\n");
    for arg in visible_args(command) {
        let _ = writeln!(
            page,
            "| `{}` | {} | {} | {} |",
            flag_spelling(arg),
            arg.get_env()
                .map(|e| format!("`{}`", e.to_string_lossy()))
                .unwrap_or_default(),
            defaults(arg),
            one_line(arg.get_help()),
        );
    }
}

/// `docs/reference/cli.md`.
fn cli_page() -> String {
    let mut page = String::from(
        "# Command-line reference\n\n\
         Generated from the code (`src/cli.rs`) by `src/reference.rs`; do not edit: run\n\
         `SPARK_LOCALIZER_UPDATE_REFERENCE=1 cargo test --lib reference`. Every flag has an\n\
         environment twin; a flag beats its twin, which beats the properties file\n\
         ([contract](../contract.md)).\n",
    );
    let _ = writeln!(page, "\n## Global flags\n");
    flag_table(&mut page, &built());
    for (path, command) in leaf_commands() {
        let _ = writeln!(
            page,
            "\n## `spark-localizer {path}`\n\n{}\n",
            one_line(command.get_about())
        );
        flag_table(&mut page, &command);
    }
    page
}

/// The documented constants of `src/env_vars.rs` that name variables (not the flags'
/// twins): `(name, doc)`, docs read from the `///` lines above each constant.
fn other_variables() -> Vec<(String, String)> {
    // A long constant's value goes on the line after its name.
    let text = include_str!("env_vars.rs").replace(": &str =\n", ": &str = ");
    let mut out = Vec::new();
    let mut doc: Vec<String> = Vec::new();
    let mut in_list = false;
    let mut list_doc = String::new();
    let mut names: Vec<String> = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(d) = line.strip_prefix("///") {
            doc.push(d.trim().to_owned());
            continue;
        }
        if in_list {
            if line.starts_with("];") {
                in_list = false;
                out.push((names.join("`, `"), list_doc.clone()));
                names.clear();
            } else if let Some(name) = line.strip_prefix('"').and_then(|l| l.strip_suffix("\",")) {
                names.push(name.to_owned());
            }
            continue;
        }
        if line.starts_with("pub(crate) const PROXY_VARS") {
            in_list = true;
            list_doc = doc.join(" ");
        } else if let Some((_, value)) = line
            .strip_prefix("pub(crate) const ")
            .and_then(|l| l.split_once(": &str ="))
        {
            let name = value
                .trim()
                .trim_end_matches(';')
                .trim_matches('"')
                .to_owned();
            let is_variable = name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if is_variable && !doc.is_empty() {
                out.push((name, doc.join(" ")));
            }
        }
        if !line.starts_with("#[") && !line.starts_with("//") {
            doc.clear();
        }
    }
    out
}

/// `docs/reference/environment.md`.
fn environment_page() -> String {
    let mut page = String::from(
        "# Environment reference\n\n\
         Generated from the code (`src/cli.rs`, `src/env_vars.rs`) by `src/reference.rs`; do\n\
         not edit: run `SPARK_LOCALIZER_UPDATE_REFERENCE=1 cargo test --lib reference`.\n\
         An empty `SPARK_LOCALIZER_*` variable counts as unset. Secrets come only from the\n\
         environment or files, and are redacted in every output.\n\n\
         ## The flags' twins\n\n\
         A flag beats its twin, which beats the Spark properties key(s) of the\n\
         `--properties-file`, which beat the default.\n\n\
         | variable | flag | command | Spark properties | what |\n|---|---|---|---|---|\n",
    );
    let mut twins = std::collections::BTreeMap::new();
    let top = built();
    let global = visible_args(&top).map(|a| ("(all)".to_owned(), a.clone()));
    let per_command = leaf_commands().into_iter().flat_map(|(path, command)| {
        visible_args(&command)
            .map(|a| (path.clone(), a.clone()))
            .collect::<Vec<_>>()
    });
    for (path, arg) in global.chain(per_command) {
        let Some(env) = arg.get_env() else { continue };
        let entry = twins
            .entry(env.to_string_lossy().into_owned())
            .or_insert_with(|| (flag_spelling(&arg), Vec::new(), one_line(arg.get_help())));
        entry.1.push(format!("`{path}`"));
    }
    for (env, (flag, commands, help)) in &twins {
        let keys = crate::config::table::ALL
            .iter()
            .find(|setting| setting.env == env)
            .map(|setting| {
                setting
                    .keys
                    .iter()
                    .map(|key| format!("`{key}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        let _ = writeln!(
            page,
            "| `{env}` | `{flag}` | {} | {keys} | {help} |",
            commands.join(", ")
        );
    }
    page.push_str("\n## Other variables read\n\n| variable | what |\n|---|---|\n");
    for (name, doc) in other_variables() {
        if !twins.contains_key(&name) {
            let _ = writeln!(page, "| `{name}` | {} |", doc.replace('|', "\\|"));
        }
    }
    page
}

fn check_page(relative: &str, generated: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative);
    if std::env::var_os(UPDATE).is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{relative} is stale: run `{UPDATE}=1 cargo test --lib reference` and commit it"
    );
}

#[test]
fn cli_reference_is_current() {
    check_page("docs/reference/cli.md", &cli_page());
}

#[test]
fn environment_reference_is_current() {
    check_page("docs/reference/environment.md", &environment_page());
}

#[test]
fn every_flag_twin_and_variable_is_listed() {
    let page = environment_page();
    for name in [
        crate::env_vars::JARS,
        crate::env_vars::STAGE_LISTEN,
        crate::env_vars::SSL_CERT_FILE,
        crate::env_vars::aws::ROLE_ARN,
        crate::env_vars::hadoop::TOKEN_FILE_LOCATION,
        crate::env_vars::aws::CONTAINER_CREDENTIALS_RELATIVE_URI,
    ] {
        assert!(page.contains(&format!("| `{name}` |")), "{name} missing");
    }
    assert!(page.contains("`NO_PROXY`"));
}

//! Where a setting's value came from: a flag, its environment twin, a key of the
//! properties file or the built-in default. `check` shows it beside every value.

use std::fmt;
use std::path::PathBuf;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A command-line flag (clap's id: its long name with `_` for `-`).
    Flag(&'static str),
    /// An environment variable.
    Env(&'static str),
    /// A key of the properties file.
    Properties { path: PathBuf, key: String },
    /// The built-in default.
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Flags are spelled with dashes where clap's ids have underscores.
            Origin::Flag(name) => write!(f, "--{}", name.replace('_', "-")),
            Origin::Env(name) => f.write_str(name),
            Origin::Properties { path, key } => write!(f, "{key} in {}", path.display()),
            Origin::Default => f.write_str("default"),
        }
    }
}

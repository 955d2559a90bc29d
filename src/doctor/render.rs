//! The diagnosis as text: a header with the image's versions, one block per
//! finding (most severe first), a count. Names come from untrusted jars and
//! properties: every field is shown with its control characters escaped.

use std::fmt::Write as _;

use super::{Diagnosis, Severity};
use crate::util::text::escape_controls as shown;

pub(super) fn text(d: &Diagnosis) -> String {
    let mut out = format!(
        "doctor: {} added jar{} against {} ({} jars: {})\n",
        d.added.len(),
        if d.added.len() == 1 { "" } else { "s" },
        shown(&d.image.dir.display().to_string()),
        d.image.jars,
        d.image.versions.shown()
    );
    for f in d.findings.iter().filter(|f| f.id != "image-versions") {
        let tag = match f.severity {
            Severity::Error => "ERROR",
            Severity::Warning => "WARN ",
            Severity::Note => "NOTE ",
        };
        let _ = writeln!(out, "  {tag} {}: {}", f.id, shown(&f.message));
        if !f.classes.is_empty() {
            let _ = writeln!(out, "        classes: {}", shown(&f.classes.join(", ")));
        }
        let _ = writeln!(out, "        fix: {}", shown(&f.advice));
    }
    let (errors, warnings) = (d.count(Severity::Error), d.count(Severity::Warning));
    let _ = writeln!(
        out,
        "doctor: {errors} error{}, {warnings} warning{}",
        if errors == 1 { "" } else { "s" },
        if warnings == 1 { "" } else { "s" }
    );
    out
}

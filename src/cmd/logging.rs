//! Tracing set-up: human text or JSON lines on stderr, every line scrubbed of
//! registered secrets, and kept clear of the progress bars.

use std::io::{IsTerminal, Write};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;
use crate::env_vars;

/// stderr, with every write passed through [`crate::util::redact::scrub`] and drawn
/// above the progress bars when they are on screen.
#[derive(Clone, Copy, Default)]
pub(crate) struct ScrubbedStderr;

impl Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = crate::util::redact::scrub(&String::from_utf8_lossy(buf));
        // A closed or full stderr must not stop the work (nor the report and the
        // termination message): lines that cannot be written are dropped.
        let _ = crate::progress::suspend(|| std::io::stderr().lock().write_all(text.as_bytes()));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for ScrubbedStderr {
    type Writer = ScrubbedStderr;
    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

/// Installs the global subscriber. `verbose`: 0 info, 1 debug, 2+ trace (our crate);
/// `quiet`: warnings and errors only. `SPARK_LOCALIZER_LOG` overrides the filter.
pub(crate) fn init(verbose: u8, quiet: bool, format: LogFormat) {
    let level = match (quiet, verbose) {
        (true, _) => "warn",
        (false, 0) => "info",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = std::env::var(env_vars::LOG)
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new(format!("warn,spark_localizer={level}")));
    crate::source::hdfs::replicas::install();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(ScrubbedStderr)
        .log_internal_errors(false)
        .with_target(false);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text if std::io::stderr().is_terminal() => builder.without_time().init(),
        LogFormat::Text => builder.with_ansi(false).init(),
    }
}

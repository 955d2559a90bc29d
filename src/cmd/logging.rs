//! Tracing set-up: human text or JSON lines on stderr, every line scrubbed of
//! registered secrets, and kept clear of the progress bars.

use std::io::{IsTerminal, Write};

use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use crate::cli::LogFormat;
use crate::env_vars;

/// stderr, with every write passed through [`crate::util::redact::scrub`] and
/// [`crate::util::text::log_safe`], drawn above the progress bars when they are on
/// screen.
#[derive(Clone, Copy, Default)]
pub(crate) struct ScrubbedStderr;

impl Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = crate::util::redact::scrub(&String::from_utf8_lossy(buf));
        // Control characters from untrusted names that tracing leaves raw (NUL, CR).
        let text = crate::util::text::log_safe(&text);
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
    // `target=level` directives (tracing's `Targets`): no regex engine in the
    // binary for a filter users write as `spark_localizer=trace,hyper=debug`.
    let filter: Targets = std::env::var(env_vars::LOG)
        .ok()
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| {
            format!("warn,spark_localizer={level}")
                .parse()
                .expect("a valid filter")
        });
    crate::source::hdfs::replicas::install();
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(ScrubbedStderr)
        .log_internal_errors(false)
        .with_target(false);
    let registry = tracing_subscriber::registry();
    match format {
        LogFormat::Json => registry
            .with(layer.json().flatten_event(true).with_filter(filter))
            .init(),
        LogFormat::Text if std::io::stderr().is_terminal() => registry
            .with(layer.without_time().with_filter(filter))
            .init(),
        LogFormat::Text => registry
            .with(layer.with_ansi(false).with_filter(filter))
            .init(),
    }
}

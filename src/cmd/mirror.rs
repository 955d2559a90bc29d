//! `mirror serve`: resolve its settings, build the sources it fetches origins
//! with (HTTP behind the allow-list's redirect and DNS guard), run it until
//! SIGTERM/SIGINT, and turn its errors into exit codes.

use std::sync::Arc;

use tracing::error;

use super::exit::ExitCode;
use crate::cli::{ArgOrigins, MirrorServeArgs};
use crate::config::mirror::MirrorSettings;
use crate::config::Problems;
use crate::mirror::allow::GuardedResolver;
use crate::mirror::{self, ServeError};
use crate::source::hdfs::HdfsSource;
use crate::source::http::HttpSource;
use crate::source::s3::S3Source;
use crate::source::staging::StagingSource;
use crate::source::Sources;
use crate::util::redact::error_chain;
use crate::util::signal::Termination;

/// Runs the mirror until SIGTERM or SIGINT: [`ExitCode::Ok`] after a clean stop,
/// [`ExitCode::Config`] for flags that cannot work, [`ExitCode::LocalIo`] for a
/// store directory that cannot be used.
pub(crate) async fn serve(args: &MirrorServeArgs, origins: &ArgOrigins) -> ExitCode {
    let mut problems = Problems::default();
    let settings = crate::config::mirror::settings(args, origins, &mut problems);
    let sources = settings.as_ref().and_then(|s| {
        sources(s, &mut problems)
            .map_err(|p| problems.push_message(p))
            .ok()
    });
    let (Some(settings), Some(sources), true) = (settings, sources, problems.is_empty()) else {
        error!("configuration problems:\n{problems}");
        return ExitCode::Config;
    };
    let config = mirror::Config {
        listen: args.listen,
        dir: args.dir.clone(),
        max_bytes: args.max_bytes,
        allow: settings.allow,
        parallelism: usize::from(args.parallelism),
        retry: settings.retry,
        stall_timeout: args.source.stall_timeout,
    };
    let shutdown = super::stage::stop_requested(Termination::install());
    match mirror::serve(config, sources, shutdown).await {
        Ok(()) => ExitCode::Ok,
        Err(e) => {
            error!("{}", error_chain(&e));
            match e {
                ServeError::Dir { .. } => ExitCode::LocalIo,
                ServeError::Listen { .. } => ExitCode::Config,
            }
        }
    }
}

/// The mirror's sources: HTTP(S) on a client whose DNS answers and redirects
/// keep to the allow-list or public addresses; S3 for the allowed buckets (their
/// endpoints are the operator's configuration, on a plain client).
fn sources(settings: &MirrorSettings, problems: &mut Problems) -> Result<Sources, String> {
    let setup = |e: crate::net::HttpSetupError| error_chain(&e);
    let allow = settings.allow.clone();
    let guarded = crate::net::client_builder(&settings.http)
        .map_err(setup)?
        .dns_resolver(Arc::new(GuardedResolver {
            allow: allow.clone(),
        }))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let http = HttpSource::guarded(
        guarded,
        &settings.http,
        Arc::new(move |next: &url::Url| allow.redirect_allowed(next)),
    );
    let plain = crate::net::client(&settings.http).map_err(setup)?;
    let buckets = settings.allow.buckets();
    let s3 = S3Source::new(&settings.s3, &plain, buckets.iter().map(String::as_str))
        .map_err(|list| {
            for p in list {
                problems.push_message(p);
            }
        })
        .unwrap_or_else(|()| {
            S3Source::new(&settings.s3, &plain, std::iter::empty()).expect("no bucket, no problem")
        });
    Ok(Sources::new(
        http,
        s3,
        HdfsSource::default(),
        StagingSource::default(),
    ))
}

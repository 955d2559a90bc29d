//! `mirror serve`'s settings: the allow-list, and the sources' configuration read
//! as `fetch` reads it (trust roots, header file, S3 credentials and the
//! properties file's `spark.hadoop.*` keys), so the mirror fetches with its own.

use crate::cli::{ArgOrigins, MirrorServeArgs};
use crate::mirror::AllowList;
use crate::net::HttpConfig;
use crate::properties::Properties;
use crate::retry::{Backoff, RetryPolicy};

use super::layers::Layers;
use super::{http_config, s3_settings, Problems};

/// Everything `mirror serve` needs, validated.
pub(crate) struct MirrorSettings {
    pub allow: AllowList,
    pub http: HttpConfig,
    pub s3: crate::s3::settings::S3Settings,
    pub retry: RetryPolicy,
}

/// Resolves `mirror serve`'s flags; problems go into `problems` (all reported at once).
pub(crate) fn settings(
    args: &MirrorServeArgs,
    origins: &ArgOrigins,
    problems: &mut Problems,
) -> Option<MirrorSettings> {
    let properties = args
        .properties_file
        .as_deref()
        .and_then(|path| Properties::load(path).map_err(|e| problems.push(e)).ok());
    let layers = Layers::new(origins, properties.as_ref());
    let allow = AllowList::parse(&args.allow_origins)
        .map_err(|list| {
            for reason in list {
                problems.push_message(reason);
            }
        })
        .ok();
    let http = http_config(
        &args.source,
        usize::from(args.parallelism),
        &layers,
        problems,
    );
    let s3 = s3_settings(&args.source, &layers, properties.as_ref());
    Some(MirrorSettings {
        allow: allow?,
        http,
        s3,
        retry: RetryPolicy {
            retries: args.source.retries,
            backoff: Backoff::new(args.source.retry_delay),
        },
    })
}

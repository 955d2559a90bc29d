//! spark-localizer: the init container that localizes Spark dependencies.
//!
//! `fetch` turns URI lists into verified files in emptyDir volumes and writes a
//! classpath fragment; `check` resolves the same plan and probes every source
//! without writing anything; `stage serve` is the resource staging server that
//! holds files uploaded by spark-submit, and `stage upload` its client. Modules are
//! named after their one job.

pub mod archive;
pub mod check;
pub mod checksums;
pub mod cli;
pub mod config;
pub mod dest;
pub mod duration;
pub mod engine;
pub mod env_vars;
pub mod exit;
pub mod extract;
pub mod fetch;
pub mod fsutil;
pub mod logging;
pub mod output;
pub mod plan;
pub mod progress;
pub mod properties;
pub mod ranged;
pub mod redact;
pub mod retry;
pub mod source;
pub mod stage;
pub mod transfer;

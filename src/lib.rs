//! spark-localizer: the init container that localizes Spark dependencies.
//!
//! `fetch` turns URI lists into verified files in emptyDir volumes and writes a
//! classpath fragment; `check` resolves the same plan and probes every source
//! without writing anything; `stage serve` is the resource staging server that
//! holds files uploaded by spark-submit, and `stage upload` its client.
//!
//! Dependencies point one way (docs/development.md draws the map):
//! [`cmd`] → `config` → `plan` → `engine` → `source` and `layout` → `output`;
//! `stage` beside them. Leaves import nothing above them: `archive`, `cli`, `net`,
//! `origin`, `properties`, `progress`, `retry`, `s3`, `cloud`, `util`, `env_vars`.

pub mod cmd;

/// Fuzz entry points (the `fuzzing` feature; `fuzz/`).
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzz;

mod archive;
mod cli;
mod cloud;
mod config;
mod doctor;
mod engine;
mod env_vars;
mod fault;
mod layout;
mod maven;
mod mirror;
mod net;
mod oci;
mod openpgp;
mod origin;
mod output;
mod plan;
mod progress;
mod properties;
#[cfg(test)]
mod reference;
mod retry;
mod s3;
mod source;
mod stage;
mod util;

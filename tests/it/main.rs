//! Integration tests: the real `spark-localizer` binary, run as a subprocess,
//! against servers on 127.0.0.1 that misbehave on purpose (and one real nginx).

// Test support is shared between modules of this one binary; the crate's
// `unreachable_pub` lint is for the library.
#![allow(unreachable_pub)]

mod support;

mod archives;
mod arm64;
mod bundle;
mod check;
mod doctor;
mod edges;
mod globs;
mod hdfs;
mod hdfs_harness;
mod http_errors;
mod image;
mod integrity;
mod jvm;
mod kerberos;
mod lists;
mod maven;
mod mirror;
mod nginx;
mod object_stores;
mod observability;
mod oci;
mod outputs;
mod pods;
mod pods_stores;
mod ranges;
mod readme;
mod restart;
mod resume;
mod s3;
mod s3_harness;
mod sbom;
mod scheduling;
mod secrets;
mod signatures;
mod snapshots;
mod source_suite;
mod spark_e2e;
mod stage_auth;
mod stage_fetch;
mod stage_owners;
mod stage_serve;
mod stage_store_s3;
mod stage_upload;
mod templates;
mod tls;
mod transient;
mod validation;

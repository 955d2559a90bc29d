//! S3 configuration shared by the `s3://` source and the staging server's S3 store:
//! buckets, endpoints and credentials from flags, the S3A keys of the properties
//! file and the AWS environment, and the credentials directory of a mounted Secret.

pub(crate) mod client;
pub(crate) mod process;
pub(crate) mod secret_dir;
pub(crate) mod settings;

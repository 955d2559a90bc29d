//! `file://` source: copies a file readable by the init container (useful locally).

use std::io::{ErrorKind, SeekFrom};
use std::path::PathBuf;

use async_trait::async_trait;
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use url::Url;

use crate::util::redact::redact_url;

use super::{Body, FaultKind, Meta, OpenRequest, Probe, Source, SourceError};

/// Size of each read from a local file.
const CHUNK: usize = 256 * 1024;

/// Reads local files named by `file://` URIs.
pub(crate) struct FileSource;

fn path_of(uri: &Url) -> Result<PathBuf, SourceError> {
    uri.to_file_path().map_err(|()| {
        SourceError::new(
            FaultKind::Refused,
            format!("{} is not a local absolute path", redact_url(uri.as_str())),
        )
    })
}

fn io_error(shown: &str, err: std::io::Error) -> SourceError {
    let kind = match err.kind() {
        ErrorKind::NotFound => FaultKind::NotFound,
        ErrorKind::PermissionDenied => FaultKind::Auth,
        _ => FaultKind::LocalIo,
    };
    SourceError::new(kind, format!("{shown}: cannot read the file")).with_source(err)
}

async fn meta(shown: &str, path: &std::path::Path) -> Result<Meta, SourceError> {
    let md = tokio::fs::metadata(path)
        .await
        .map_err(|e| io_error(shown, e))?;
    if !md.is_file() {
        return Err(SourceError::new(
            FaultKind::Refused,
            format!("{shown}: {} is not a regular file", path.display()),
        ));
    }
    // Length and modification time identify this version of the file, so a
    // resume never splices a file rewritten in between.
    let modified = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok(Meta {
        size: Some(md.len()),
        validator: Some(format!("{}-{modified}", md.len())),
        ranges: true,
    })
}

#[async_trait]
impl Source for FileSource {
    async fn open(&self, uri: &Url, req: &OpenRequest) -> Result<Body, SourceError> {
        let path = path_of(uri)?;
        let shown = redact_url(uri.as_str());
        let meta = meta(&shown, &path).await?;
        // Non-blocking open: a fifo swapped in after the check above cannot hang us;
        // what was opened must still be a regular file.
        let mut file = tokio::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .await
            .map_err(|e| io_error(&shown, e))?;
        if !file
            .metadata()
            .await
            .map_err(|e| io_error(&shown, e))?
            .is_file()
        {
            return Err(SourceError::new(
                FaultKind::Refused,
                format!("{shown}: {} is not a regular file", path.display()),
            ));
        }
        // Like If-Range: resume only the same version, else send it all.
        let offset = if req.offset > 0 && req.validator == meta.validator {
            req.offset
        } else {
            0
        };
        if offset > 0 {
            file.seek(SeekFrom::Start(offset))
                .await
                .map_err(|e| io_error(&shown, e))?;
        }
        let limit = req.end.map_or(u64::MAX, |end| end.saturating_sub(offset));
        let file = file.take(limit);
        let stream = tokio_util::io::ReaderStream::with_capacity(file, CHUNK)
            .map(move |chunk| chunk.map_err(|e| io_error(&shown, e)));
        Ok(Body {
            meta,
            offset,
            stream: stream.boxed(),
        })
    }

    async fn probe(&self, uri: &Url) -> Result<Probe, SourceError> {
        let path = path_of(uri)?;
        Ok(Probe {
            meta: meta(&redact_url(uri.as_str()), &path).await?,
            status: "readable".into(),
            redirected_to: None,
        })
    }
}

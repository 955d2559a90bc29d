//! The access log: one line per request (method, path, status, bytes in and out,
//! duration) written when its answer's body is done or dropped. Never a header
//! value, so never a secret; a resource path's segment that is not a valid id shows
//! as `<not an id>`.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::Response;
use tracing::{debug, info};

use crate::stage::api;

/// Logs one line per request when its answer's body is done (or dropped).
pub(super) async fn log_request(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = req.method().clone();
    let path = logged_path(req.uri().path());
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    let req = req.map(|body| {
        Body::new(CountedBody {
            inner: body,
            count: counter,
        })
    });
    let response = next.run(req).await;
    let status = response.status().as_u16();
    let length = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    // Probes every few seconds would drown the rest.
    let quiet = path == api::HEALTHZ_PATH || path == api::METRICS_PATH;
    response.map(|body| {
        Body::new(LoggedBody {
            inner: body,
            sent: 0,
            done: false,
            line: RequestLine {
                method,
                path,
                status,
                received,
                start,
                quiet,
                length,
            },
        })
    })
}

/// What the log shows of a request path: a resource path's segment that is not a
/// valid id (say, a secret pasted in its place) is shown as `<not an id>`.
fn logged_path(path: &str) -> String {
    let resource = path
        .strip_prefix(api::RESOURCES_PATH)
        .and_then(|rest| rest.strip_prefix('/'));
    match resource {
        Some(rest) if !rest.is_empty() && !api::is_resource_id(rest) => {
            format!("{}/<not an id>", api::RESOURCES_PATH)
        }
        _ => path.to_owned(),
    }
}

struct CountedBody {
    inner: Body,
    count: Arc<AtomicU64>,
}

impl http_body::Body for CountedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.count.fetch_add(data.len() as u64, Ordering::Relaxed);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

struct RequestLine {
    method: Method,
    path: String,
    status: u16,
    received: Arc<AtomicU64>,
    start: Instant,
    quiet: bool,
    /// The answer's Content-Length, if any.
    length: Option<u64>,
}

struct LoggedBody {
    inner: Body,
    sent: u64,
    /// The body ended (or was empty).
    done: bool,
    line: RequestLine,
}

impl http_body::Body for LoggedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.sent += data.len() as u64;
                }
            }
            Poll::Ready(None) => self.done = true,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        let line = &self.line;
        let (method, path, status) = (&line.method, &line.path, line.status);
        let bytes_in = line.received.load(Ordering::Relaxed);
        let ms = line.start.elapsed().as_millis() as u64;
        let complete = self.done
            || http_body::Body::is_end_stream(&self.inner)
            || line.length == Some(self.sent);
        if line.quiet {
            debug!(%method, %path, status, bytes_in, bytes_out = self.sent, ms, "request");
        } else if complete {
            info!(%method, %path, status, bytes_in, bytes_out = self.sent, ms, "request");
        } else {
            info!(%method, %path, status, bytes_in, bytes_out = self.sent, ms, complete, "request");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_paths_hide_what_is_not_an_id() {
        let id = "0123456789abcdef0123456789abcdef";
        let cases = [
            (
                format!("/api/v0/resources/{id}"),
                format!("/api/v0/resources/{id}"),
            ),
            ("/api/v0/resources".into(), "/api/v0/resources".into()),
            ("/api/v0/resources/".into(), "/api/v0/resources/".into()),
            (
                "/api/v0/resources/q1w2e3-SECRET_x".into(),
                "/api/v0/resources/<not an id>".into(),
            ),
            (
                format!("/api/v0/resources/{id}/SECRET"),
                "/api/v0/resources/<not an id>".into(),
            ),
            ("/healthz".into(), "/healthz".into()),
        ];
        for (path, want) in cases {
            assert_eq!(logged_path(&path), want, "{path}");
        }
    }
}

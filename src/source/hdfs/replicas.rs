//! Why every replica of a block failed. hdfs-native tries each DataNode in turn
//! and, when none is left, reports only "All DataNodes failed"; the reason for
//! each (a checksum mismatch, a refused connection) is in the warnings it logs
//! while we poll its stream. A tracing layer hands those warnings to the stream
//! being polled on this thread, so a corrupt block (integrity failure) can be
//! told from unreachable DataNodes (retried).

use std::cell::RefCell;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;

thread_local! {
    /// The warnings of the stream being polled on this thread, if one is.
    static SINK: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// hdfs-native logs through the `log` crate: its warnings go to the stream being
/// polled (and, as debug lines, to our log for `-v`).
struct CaptureLogger;

static LOGGER: CaptureLogger = CaptureLogger;

impl log::Log for CaptureLogger {
    fn enabled(&self, meta: &log::Metadata<'_>) -> bool {
        meta.level() <= log::Level::Warn && meta.target().starts_with("hdfs_native")
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let text = record.args().to_string();
        tracing::debug!("hdfs-native: {text}");
        SINK.with(|sink| {
            if let Some(seen) = sink.borrow_mut().as_mut() {
                if seen.len() < 64 {
                    seen.push(text);
                }
            }
        });
    }

    fn flush(&self) {}
}

/// Installs the logger (once per process; later calls do nothing).
pub(crate) fn install() {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
}

/// A stream that remembers the hdfs-native warnings logged while it is polled.
pub(crate) struct Watched<S> {
    inner: S,
    seen: Vec<String>,
}

impl<S> Watched<S> {
    pub(crate) fn new(inner: S) -> Self {
        Watched {
            inner,
            seen: Vec::new(),
        }
    }
}

impl<S: Stream + Unpin> Watched<S> {
    /// Whether a replica was refused for a checksum mismatch.
    pub(crate) fn saw_checksum_errors(&self) -> bool {
        self.seen.iter().any(|m| m.contains("ChecksumError"))
    }

    /// The DataNodes that failed, each with why: `ip:port (reason)`.
    pub(crate) fn failed_datanodes(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for line in &self.seen {
            let Some(node) = datanode_of(line) else {
                continue;
            };
            let why = line
                .rsplit_once("}: ")
                .map(|(_, why)| short_reason(why))
                .unwrap_or_else(|| short_reason(line));
            let entry = format!("{node} ({why})");
            if !out.contains(&entry) {
                out.push(entry);
            }
        }
        out
    }
}

/// `ip:xfer_port` of the `DatanodeIdProto { ip_addr: "…", …, xfer_port: N, … }`
/// hdfs-native's warnings print.
pub(crate) fn datanode_of(line: &str) -> Option<String> {
    let ip = line.split("ip_addr: \"").nth(1)?.split('"').next()?;
    let port = line
        .split("xfer_port: ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .filter(|port| !port.is_empty())?;
    Some(format!("{ip}:{port}"))
}

/// The gist of a Debug-printed error: the `kind` of an I/O error, else the
/// text cut short.
pub(crate) fn short_reason(why: &str) -> String {
    let why = match why.split("kind: ").nth(1) {
        Some(kind) => kind.split([',', ' ', '}']).next().unwrap_or(kind),
        None => why.trim(),
    };
    // Either way at most 120 characters (a `kind` too: the fuzzer found a long one).
    match why.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &why[..at]),
        None => why.to_owned(),
    }
}

impl<S: Stream + Unpin> Stream for Watched<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = &mut *self;
        let previous = SINK.with(|s| s.replace(Some(std::mem::take(&mut this.seen))));
        let polled = Pin::new(&mut this.inner).poll_next(cx);
        this.seen = SINK.with(|s| s.replace(previous)).unwrap_or_default();
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[test]
    fn a_datanode_without_a_port_is_not_named() {
        assert_eq!(
            datanode_of(r#"DatanodeIdProto { ip_addr: "10.0.0.7", xfer_port: 9866 }"#).as_deref(),
            Some("10.0.0.7:9866")
        );
        assert_eq!(datanode_of(r#"ip_addr: "10.0.0.7", xfer_port: None"#), None);
        // A reason is at most 120 characters (and the ellipsis), a `kind` too.
        let long = format!("Io(Custom {{ kind: {} }})", "X".repeat(500));
        assert_eq!(short_reason(&long).chars().count(), 121);
        assert_eq!(short_reason("x { kind: NotFound, y }"), "NotFound");
    }

    #[test]
    fn failed_datanodes_are_named_with_their_reason() {
        let mut w = Watched::new(futures_util::stream::empty::<()>());
        w.seen = vec![
            r#"Failed to connect to DataNode DatanodeIdProto { ip_addr: "10.0.0.7", host_name: "dn7", datanode_uuid: "u", xfer_port: 9866, info_port: 9864, ipc_port: 9867, info_secure_port: None }: IOError(Os { code: 111, kind: ConnectionRefused, message: "Connection refused" })"#.to_owned(),
            r#"Read operation did not succeed for DataNode DatanodeIdProto { ip_addr: "10.0.0.8", host_name: "dn8", datanode_uuid: "v", xfer_port: 9866, info_port: 9864, ipc_port: 9867, info_secure_port: None }: replica not found"#.to_owned(),
            "Error occurred while reading from DataNode: ChecksumError".to_owned(),
        ];
        assert_eq!(
            w.failed_datanodes(),
            vec![
                "10.0.0.7:9866 (ConnectionRefused)".to_owned(),
                "10.0.0.8:9866 (replica not found)".to_owned()
            ]
        );
    }

    #[test]
    fn warnings_logged_while_polling_are_kept() {
        install();
        let inner = futures_util::stream::iter([1, 2]).map(|i| {
            log::warn!(target: "hdfs_native::hdfs::block_reader", "Error occurred while reading from DataNode: ChecksumError {i}");
            log::warn!(target: "other", "not ours ChecksumError");
            i
        });
        let mut w = Watched::new(inner);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async { while w.next().await.is_some() {} });
        assert!(w.saw_checksum_errors());
        assert_eq!(w.seen.len(), 2);
        assert!(w.failed_datanodes().is_empty());
        // Outside a poll nothing is collected.
        log::warn!(target: "hdfs_native", "ChecksumError");
        assert_eq!(w.seen.len(), 2);
    }
}

//! Reading an object through object_store, shared by the S3, GCS and Azure
//! sources: a GET from an offset or of one range (the range continuing the
//! version it started on, else answered from the start), and a HEAD.

use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path as KeyPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use url::Url;

use super::{Body, FaultKind, Meta, OpenRequest, Probe, SourceError};

/// One store per name (a bucket, a container), each configured once — also
/// one that cannot be, so its problems are said once —; every problem of every
/// store returned together, each prefixed with `what` and the name.
pub(super) fn configure_each<T, V>(
    items: impl IntoIterator<Item = (String, T)>,
    what: &str,
    open: impl Fn(T) -> Result<V, Vec<String>>,
) -> Result<std::collections::BTreeMap<String, V>, Vec<String>> {
    let mut problems = Vec::new();
    let mut out = std::collections::BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    for (name, item) in items {
        if !seen.insert(name.clone()) {
            continue;
        }
        match open(item) {
            Ok(store) => {
                out.insert(name, store);
            }
            Err(p) => problems.extend(p.into_iter().map(|p| format!("{what} '{name}': {p}"))),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// Opens `key` for `req`; `classify` turns object_store's errors into the
/// engine's. A range continues a version: If-Match its ETag; when the object
/// changed, it is answered from the start, as If-Range does over HTTP.
pub(super) async fn open(
    store: &dyn ObjectStore,
    key: &KeyPath,
    uri: &Url,
    req: &OpenRequest,
    classify: impl Fn(object_store::Error) -> SourceError,
) -> Result<Body, SourceError> {
    let range = match (req.offset, req.end) {
        (0, None) => None,
        (start, None) => Some(GetRange::Offset(start)),
        (start, Some(end)) => Some(GetRange::Bounded(start..end)),
    };
    let if_match = range.as_ref().and(req.validator.clone());
    let ranged = range.is_some();
    let options = GetOptions {
        range,
        if_match,
        ..GetOptions::default()
    };
    let result = match store.get_opts(key, options).await {
        Err(object_store::Error::Precondition { .. }) if ranged => {
            store.get_opts(key, GetOptions::default()).await
        }
        other => other,
    }
    .map_err(classify)?;
    let meta = Meta {
        size: Some(result.meta.size),
        validator: result.meta.e_tag.clone(),
        ranges: true,
    };
    let offset = result.range.start;
    let shown = crate::util::redact::redact_url(uri.as_str());
    let stream = result.into_stream().map_err(move |e| {
        SourceError::new(
            FaultKind::Transient,
            format!(
                "{shown}: reading the body: {}",
                crate::cloud::root_cause(&e)
            ),
        )
    });
    Ok(Body {
        meta,
        offset,
        stream: stream.boxed(),
    })
}

/// Size and version of `key`, without its body; an error explained (see
/// [`explain`]) and classified by `classify`.
pub(super) async fn probe(
    store: &dyn ObjectStore,
    key: &KeyPath,
    classify: impl Fn(object_store::Error) -> SourceError,
) -> Result<Probe, SourceError> {
    match head(store, key).await {
        Ok(probe) => Ok(probe),
        Err(e) => Err(classify(explain(store, key, e).await)),
    }
}

/// Size and version of `key`, without its body.
async fn head(store: &dyn ObjectStore, key: &KeyPath) -> Result<Probe, object_store::Error> {
    let meta = store.head(key).await?;
    Ok(Probe {
        meta: Meta {
            size: Some(meta.size),
            validator: meta.e_tag,
            ranges: true,
        },
        status: "200 OK".to_owned(),
        redirected_to: None,
    })
}

/// A HEAD answer has no body, so no error code: ask for one byte to tell a
/// missing bucket from a missing object, bad credentials from a bad request.
async fn explain(
    store: &dyn ObjectStore,
    key: &KeyPath,
    err: object_store::Error,
) -> object_store::Error {
    if crate::cloud::find_cause::<object_store::client::HttpError>(&err).is_some() {
        return err;
    }
    let one = GetOptions {
        range: Some(GetRange::Bounded(0..1)),
        ..GetOptions::default()
    };
    match store.get_opts(key, one).await {
        Err(e) => e,
        Ok(_) => err,
    }
}

//! Kerberos for HDFS: who the client will be, found out before the first
//! NameNode call through the system's GSSAPI (`libgssapi_krb5.so.2`, loaded at
//! run time as hdfs-native loads it; the static build has none).
//!
//! Two ways in, as Hadoop clients have them:
//! - a **keytab** (`--kerberos-keytab`, `spark.kerberos.keytab`): a ticket is
//!   obtained from the KDC into a credential cache in this process's memory
//!   (`MEMORY:`), no writable file needed; hdfs-native is handed the same cache,
//!   keytab and principal, so it uses that ticket;
//! - a **ticket cache** (`KRB5CCNAME`, else krb5.conf's default): read as it is.
//!
//! Either way the result is a principal and when its ticket expires (shown by
//! `check`), or an error naming the cause and what to do: expired tickets, a
//! keytab whose key the KDC does not accept, an unreachable KDC, clock skew.

use std::ffi::{c_char, c_void, CString};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::keytab;

/// The in-memory credential cache a keytab's ticket goes into (one per process;
/// libkrb5 shares `MEMORY:` caches between everything loaded in the process).
pub(crate) const MEMORY_CACHE: &str = "MEMORY:spark-localizer";

/// What the user configured: a keytab and a principal, each with where it was given.
#[derive(Debug, Clone, Default)]
pub(crate) struct KerberosSettings {
    pub keytab: Option<(PathBuf, String)>,
    pub principal: Option<(String, String)>,
    /// The keytab was named by the properties file (not a flag or its twin).
    pub keytab_from_properties: bool,
    /// The principal was named by the properties file.
    pub principal_from_properties: bool,
    /// [`validate`] ran (for flags, before knowing whether HDFS is used).
    pub validated: bool,
}

/// Who the client is, and until when.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub principal: String,
    /// When the ticket expires (`None`: the library says never).
    pub expires: Option<SystemTime>,
    /// Where the credentials come from, for messages.
    pub from: String,
}

impl Identity {
    /// `alice@REALM (keytab /x from --kerberos-keytab), ticket valid until <date> (in 9h 59m)`.
    pub(crate) fn describe(&self) -> String {
        let until = match self.expires {
            None => "a ticket without end time".to_owned(),
            Some(at) => {
                let left = at
                    .duration_since(SystemTime::now())
                    .unwrap_or(Duration::ZERO);
                format!(
                    "ticket valid until {} (in {}, by this pod's clock)",
                    httpdate::fmt_http_date(at),
                    crate::util::duration::format_duration(Duration::from_secs(left.as_secs()))
                )
            }
        };
        format!("{} ({}), {until}", self.principal, self.from)
    }
}

/// Whether `principal` is written as one: components separated by `/`, none
/// empty, and at most one realm after `@`, not empty.
fn well_formed(principal: &str) -> bool {
    let (name, realm) = match principal.rsplit_once('@') {
        Some((name, realm)) => (name, Some(realm)),
        None => (principal, None),
    };
    !principal
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
        && !name.is_empty()
        && !name.contains('@')
        && name.split('/').all(|c| !c.is_empty())
        && realm.is_none_or(|r| !r.is_empty())
}

/// Checks the settings before any traffic: a keytab that is a regular file of at
/// most 1 MiB holding keys, for the principal named (which defaults to its first
/// entry); a principal that is one. A keytab named only by the properties file and
/// absent here is dropped with a warning, with a principal the properties name
/// beside it (Spark reads `spark.kerberos.keytab` on the submitting machine; the
/// pod may well use a ticket cache or tokens).
pub(crate) fn validate(settings: &mut KerberosSettings, problems: &mut Vec<String>) {
    if std::mem::replace(&mut settings.validated, true) {
        return;
    }
    if let Some((principal, origin)) = &settings.principal {
        if !well_formed(principal) {
            problems.push(format!(
                "{origin}: '{}' is not a Kerberos principal (write user@REALM or service/host@REALM)",
                principal.escape_debug()
            ));
            settings.principal = None;
        }
    }
    let Some((path, origin)) = settings.keytab.clone() else {
        return;
    };
    let read = crate::util::fs::read_regular(&path, keytab::FILE_LIMIT);
    let held = match read {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && settings.keytab_from_properties => {
            tracing::warn!(
                "{origin}: {} does not exist in this container; not using a keytab (mount the keytab Secret and give --kerberos-keytab to use one)",
                path.display()
            );
            settings.keytab = None;
            if settings.principal_from_properties {
                settings.principal = None;
            }
            return;
        }
        Err(e) => {
            problems.push(format!(
                "{origin}: cannot read keytab {}: {e}; mount the keytab Secret there (a regular file of at most 1 MiB, readable by this container's user)",
                path.display()
            ));
            return;
        }
        Ok(bytes) => match keytab::keytab_principals(&bytes) {
            Ok(held) => held,
            Err(why) => {
                problems.push(format!(
                    "{origin}: {} is not a usable keytab ({why})",
                    path.display()
                ));
                return;
            }
        },
    };
    match &settings.principal {
        Some((principal, p_origin)) if !held.iter().any(|h| keytab::names(principal, h)) => {
            problems.push(format!(
                "{p_origin}: {principal} has no key in the keytab {} ({origin}), which holds {}: name one of those, or mount that principal's keytab",
                path.display(),
                held.join(", ")
            ));
        }
        Some(_) => {}
        None => {
            settings.principal = Some((held[0].clone(), format!("the first entry of {origin}")));
        }
    }
}

/// The ticket cache the library will read: `KRB5CCNAME`, else the usual default.
fn cache_name() -> (String, bool) {
    match std::env::var(crate::env_vars::hadoop::KRB5CCNAME) {
        Ok(v) if !v.is_empty() => (v, true),
        _ => (
            // SAFETY: getuid cannot fail.
            format!("FILE:/tmp/krb5cc_{}", unsafe { libc::getuid() }),
            false,
        ),
    }
}

fn cache_shown(name: &str, named: bool) -> String {
    if named {
        format!("ticket cache {name} (KRB5CCNAME)")
    } else {
        format!("default ticket cache (krb5.conf's default_ccache_name, else {name}; set KRB5CCNAME to name one)")
    }
}

/// A `FILE:` ticket cache checked before libkrb5 reads it (it crashes on some
/// malformed ones): `Ok(None)` when it is absent (libkrb5 says so better), its
/// default principal when it parses.
fn check_cache(name: &str, shown: &str) -> Result<Option<String>, String> {
    let Some(path) = keytab::file_cache(name) else {
        return Ok(None);
    };
    match crate::util::fs::read_regular(path, keytab::FILE_LIMIT) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            "Kerberos: cannot read the {shown}: {e}; mount the ticket cache kinit made (a regular file of at most 1 MiB)"
        )),
        Ok(bytes) => keytab::ccache_principal(&bytes)
            .map(Some)
            .map_err(|why| format!("Kerberos: the {shown} is not a valid ticket cache ({why}): run kinit again and mount what it writes")),
    }
}

/// Obtains (keytab) or reads (ticket cache) the client's credentials, within
/// `limit`: a KDC that does not answer makes libkrb5 wait about half a minute. The
/// waiting is done by a thread of its own, so nothing else stops meanwhile.
pub(crate) async fn login(
    settings: &KerberosSettings,
    limit: Duration,
) -> Result<Identity, String> {
    let settings = settings.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("kerberos-login".to_owned())
        .spawn(move || {
            let _ = tx.send(login_now(&settings));
        });
    if let Err(e) = spawned {
        return Err(format!("Kerberos: cannot start the login: {e}"));
    }
    match tokio::time::timeout(limit, rx).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err("Kerberos: the login stopped without an answer".to_owned()),
        Err(_) => Err(format!(
            "Kerberos: no answer from the KDC within {} (--connect-timeout): check that krb5.conf (KRB5_CONFIG, else /etc/krb5.conf) names the realm's KDCs and that this pod can reach them (port 88, TCP and UDP)",
            crate::util::duration::format_duration(limit)
        )),
    }
}

/// With no keytab: the ticket cache checked without libkrb5 (see [`check_cache`])
/// and its principal when it is a file; an error when it is corrupt or holds
/// another principal than the one named.
pub(crate) fn check_ticket_cache(settings: &KerberosSettings) -> Result<Option<String>, String> {
    if settings.keytab.is_some() {
        return Ok(None);
    }
    let (cache, named) = cache_name();
    let from = cache_shown(&cache, named);
    let held = check_cache(&cache, &from)?;
    if let (Some(held), Some((wanted, origin))) = (&held, &settings.principal) {
        if !keytab::names(wanted, held) {
            return Err(format!(
                "Kerberos: the {from} holds tickets for {held}, not {wanted} ({origin}): kinit as {wanted}, or drop the principal setting"
            ));
        }
    }
    Ok(held)
}

fn login_now(settings: &KerberosSettings) -> Result<Identity, String> {
    let gss = Gss::load()?;
    let name = match &settings.principal {
        Some((principal, _)) => Some(gss.import_principal(principal)?),
        None => None,
    };
    let (cred, from) = match &settings.keytab {
        Some((keytab, origin)) => {
            let from = format!("keytab {} from {origin}", keytab.display());
            let cred = gss
                .acquire_from_keytab(name.as_ref(), keytab, MEMORY_CACHE)
                .map_err(|e| explain(&e, settings, &from))?;
            (cred, from)
        }
        None => {
            let (cache, named) = cache_name();
            let from = cache_shown(&cache, named);
            check_ticket_cache(settings)?;
            let cred = gss
                .acquire_default(name.as_ref())
                .map_err(|e| explain(&e, settings, &from))?;
            (cred, from)
        }
    };
    let (principal, lifetime) = gss
        .inquire(&cred)
        .map_err(|e| explain(&e, settings, &from))?;
    Ok(Identity {
        principal,
        expires: (lifetime != GSS_C_INDEFINITE)
            .then(|| SystemTime::now() + Duration::from_secs(u64::from(lifetime))),
        from,
    })
}

/// A GSSAPI failure: the library's words (major, then minor status).
#[derive(Debug)]
pub(crate) struct GssFailure {
    major: u32,
    text: String,
}

/// The cause of a failed login in words a user can act on, from libkrb5's message.
fn explain(e: &GssFailure, settings: &KerberosSettings, from: &str) -> String {
    let who = settings
        .principal
        .as_ref()
        .map(|(p, origin)| format!(" for {p} ({origin})"))
        .unwrap_or_default();
    let text = &e.text;
    let has = |needle: &str| text.contains(needle);
    let what = if (e.major >> 16) & 0xff == GSS_S_CREDENTIALS_EXPIRED || has("expired") {
        format!("the tickets in the {from} have expired: run kinit again (kinit -R while renewable), or mount a keytab (--kerberos-keytab) so spark-localizer obtains its own")
    } else if has("Preauthentication failed")
        || has("Password incorrect")
        || has("Key version number")
        || has("Decrypt integrity check failed")
        || has("No key table entry found")
        || has("Bad encryption type")
    {
        format!("the KDC does not accept the key in the {from}{who} (a wrong keytab, or the principal's key changed after the keytab was exported: export it again, e.g. kadmin ktadd -norandkey)")
    } else if has("Cannot contact any KDC") {
        "no KDC of the realm answered: check that krb5.conf (KRB5_CONFIG, else /etc/krb5.conf) names the realm's KDCs and that this pod can reach them (port 88, TCP and UDP)".to_owned()
    } else if has("Cannot find KDC") {
        "krb5.conf names no KDC for the realm: is krb5.conf mounted (at /etc/krb5.conf, or KRB5_CONFIG pointing at it) and does it list the realm's KDCs?".to_owned()
    } else if has("Improper format of Kerberos configuration") || has("configuration file") {
        "krb5.conf cannot be read as a Kerberos configuration (KRB5_CONFIG, else /etc/krb5.conf): check its syntax".to_owned()
    } else if has("Invalid message type") || has("did not match") || has("Message stream modified")
    {
        "the KDC's answer is not a Kerberos answer: check the KDC addresses in krb5.conf".to_owned()
    } else if has("Clock skew") {
        "this pod's clock and the KDC's differ by more than the allowed skew (5 minutes unless krb5.conf's clockskew says otherwise): fix the node's time synchronisation".to_owned()
    } else if has("not found in Kerberos database") {
        format!("the KDC does not know the principal{who}: check --kerberos-principal (spark.kerberos.principal) and its realm")
    } else if has("default realm") || has("Configuration file") {
        "krb5.conf is missing or names no default realm: mount it at /etc/krb5.conf or point KRB5_CONFIG at it".to_owned()
    } else if has("No Kerberos credentials") || has("No credentials cache") || has("not found") {
        format!("no ticket{who} in the {from}: run kinit, or mount the ticket cache and set KRB5CCNAME, or mount a keytab (--kerberos-keytab)")
    } else {
        format!("the login{who} with the {from} failed")
    };
    format!("Kerberos: {what} ({})", crate::util::redact::scrub(text))
}

/// What to do about a Kerberos exchange with a NameNode that failed after the
/// login: the NameNode's (or the library's) words, read for their cause.
pub(crate) fn hint(text: &str) -> &'static str {
    let has = |needle: &str| text.contains(needle);
    if has("Clock skew") || has("not yet valid") {
        "the clocks of this pod, the KDC and the NameNode disagree by more than the allowed skew (5 minutes unless krb5.conf's clockskew says otherwise): fix the nodes' time synchronisation"
    } else if has("expired") {
        "the ticket expired: run kinit again, or mount a keytab (--kerberos-keytab) so spark-localizer obtains its own"
    } else if has("Server not found in Kerberos database") {
        "the KDC knows no service principal for this NameNode host: use the host name its principal names (dfs.namenode.kerberos.principal), not an IP address or alias"
    } else if has("No key table entry") || has("Wrong principal") || has("Decrypt integrity") {
        "the NameNode cannot read the ticket: its keytab does not hold the key the KDC used (a NameNode configuration problem, for the cluster's admins)"
    } else {
        "check the ticket (klist) and the NameNode's service principal"
    }
}

// ---------------------------------------------------------------------------
// The few GSSAPI calls needed (RFC 2744, plus MIT's gss_acquire_cred_from).
// ---------------------------------------------------------------------------

const GSS_C_INDEFINITE: u32 = 0xffff_ffff;
const GSS_C_INITIATE: i32 = 1;
const GSS_C_GSS_CODE: i32 = 1;
const GSS_C_MECH_CODE: i32 = 2;
const GSS_S_CREDENTIALS_EXPIRED: u32 = 11;

#[repr(C)]
struct Buffer {
    length: usize,
    value: *mut c_void,
}

#[repr(C)]
struct Oid {
    length: u32,
    elements: *const c_void,
}

#[repr(C)]
struct KeyValue {
    key: *const c_char,
    value: *const c_char,
}

#[repr(C)]
struct KeyValueSet {
    count: u32,
    elements: *const KeyValue,
}

/// 1.2.840.113554.1.2.2.1, GSS_KRB5_NT_PRINCIPAL_NAME.
static KRB5_PRINCIPAL_OID: [u8; 10] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02, 0x01];

type Name = *mut c_void;
type Cred = *mut c_void;

type ImportName = unsafe extern "C" fn(*mut u32, *const Buffer, *const Oid, *mut Name) -> u32;
type AcquireCred = unsafe extern "C" fn(
    *mut u32,
    Name,
    u32,
    *const c_void,
    i32,
    *mut Cred,
    *mut *mut c_void,
    *mut u32,
) -> u32;
type AcquireCredFrom = unsafe extern "C" fn(
    *mut u32,
    Name,
    u32,
    *const c_void,
    i32,
    *const KeyValueSet,
    *mut Cred,
    *mut *mut c_void,
    *mut u32,
) -> u32;
type InquireCred =
    unsafe extern "C" fn(*mut u32, Cred, *mut Name, *mut u32, *mut i32, *mut *mut c_void) -> u32;
type DisplayName = unsafe extern "C" fn(*mut u32, Name, *mut Buffer, *mut *const Oid) -> u32;
type DisplayStatus =
    unsafe extern "C" fn(*mut u32, u32, i32, *const Oid, *mut u32, *mut Buffer) -> u32;
type ReleaseBuffer = unsafe extern "C" fn(*mut u32, *mut Buffer) -> u32;
type ReleaseName = unsafe extern "C" fn(*mut u32, *mut Name) -> u32;
type ReleaseCred = unsafe extern "C" fn(*mut u32, *mut Cred) -> u32;

/// The loaded library and its functions.
struct Gss {
    _lib: libloading::Library,
    import_name: ImportName,
    acquire_cred: AcquireCred,
    acquire_cred_from: Option<AcquireCredFrom>,
    inquire_cred: InquireCred,
    display_name: DisplayName,
    display_status: DisplayStatus,
    release_buffer: ReleaseBuffer,
    release_name: ReleaseName,
    release_cred: ReleaseCred,
}

/// An owned name or credential, released on drop.
struct Owned<'a> {
    gss: &'a Gss,
    ptr: *mut c_void,
    cred: bool,
}

impl<'a> Owned<'a> {
    /// Takes ownership of a credential (`cred`) or a name the library returned.
    fn of(gss: &'a Gss, ptr: *mut c_void, cred: bool) -> Owned<'a> {
        Owned { gss, ptr, cred }
    }
}

impl Drop for Owned<'_> {
    fn drop(&mut self) {
        let mut minor = 0;
        // SAFETY: `ptr` came from the library's import/acquire and is released once.
        unsafe {
            if self.cred {
                (self.gss.release_cred)(&mut minor, &mut self.ptr);
            } else {
                (self.gss.release_name)(&mut minor, &mut self.ptr);
            }
        }
    }
}

impl Gss {
    fn load() -> Result<Gss, String> {
        // SAFETY: the system GSSAPI library, whose initialisers hdfs-native runs too;
        // each symbol is given its RFC 2744 / MIT signature.
        unsafe {
            let lib = libloading::Library::new("libgssapi_krb5.so.2").map_err(|e| {
                format!(
                    "Kerberos: cannot load libgssapi_krb5.so.2 ({e}); {}",
                    super::NO_KERBEROS
                )
            })?;
            macro_rules! sym {
                ($name:literal) => {
                    *lib.get(concat!($name, "\0").as_bytes()).map_err(|e| {
                        format!("Kerberos: libgssapi_krb5.so.2 lacks {}: {e}", $name)
                    })?
                };
            }
            Ok(Gss {
                import_name: sym!("gss_import_name"),
                acquire_cred: sym!("gss_acquire_cred"),
                acquire_cred_from: lib
                    .get::<AcquireCredFrom>(b"gss_acquire_cred_from\0")
                    .ok()
                    .map(|s| *s),
                inquire_cred: sym!("gss_inquire_cred"),
                display_name: sym!("gss_display_name"),
                display_status: sym!("gss_display_status"),
                release_buffer: sym!("gss_release_buffer"),
                release_name: sym!("gss_release_name"),
                release_cred: sym!("gss_release_cred"),
                _lib: lib,
            })
        }
    }

    /// The text of one status code (`kind`: GSS or mechanism code), every line.
    fn status_text(&self, code: u32, kind: i32) -> String {
        let mut lines = Vec::new();
        let mut context = 0u32;
        loop {
            let (mut minor, mut buf) = (0, Buffer::empty());
            // SAFETY: valid out-pointers; the buffer is released below.
            let major = unsafe {
                (self.display_status)(
                    &mut minor,
                    code,
                    kind,
                    std::ptr::null(),
                    &mut context,
                    &mut buf,
                )
            };
            if major != 0 {
                break;
            }
            lines.push(self.take(&mut buf));
            if context == 0 || lines.len() > 8 {
                break;
            }
        }
        lines.join("; ")
    }

    fn check(&self, major: u32, minor: u32) -> Result<(), GssFailure> {
        if major & 0xffff_0000 == 0 {
            return Ok(());
        }
        // The mechanism's words are the specific ones ("Preauthentication failed");
        // a minor status of 0 means it has none.
        let mech = if minor != 0 {
            self.status_text(minor, GSS_C_MECH_CODE)
        } else {
            String::new()
        };
        let text = if mech.is_empty() || mech == "Success" {
            self.status_text(major, GSS_C_GSS_CODE)
        } else {
            mech
        };
        Err(GssFailure { major, text })
    }

    /// Copies a library buffer into a string and releases it.
    fn take(&self, buf: &mut Buffer) -> String {
        let text = if buf.value.is_null() {
            String::new()
        } else {
            // SAFETY: the library filled `length` bytes at `value`.
            let bytes = unsafe { std::slice::from_raw_parts(buf.value as *const u8, buf.length) };
            String::from_utf8_lossy(bytes).into_owned()
        };
        let mut minor = 0;
        // SAFETY: a buffer the library allocated.
        unsafe { (self.release_buffer)(&mut minor, buf) };
        text
    }

    fn import_principal(&self, principal: &str) -> Result<Owned<'_>, String> {
        let buf = Buffer {
            length: principal.len(),
            value: principal.as_ptr() as *mut c_void,
        };
        let oid = Oid {
            length: KRB5_PRINCIPAL_OID.len() as u32,
            elements: KRB5_PRINCIPAL_OID.as_ptr().cast(),
        };
        let (mut minor, mut name) = (0, std::ptr::null_mut());
        // SAFETY: the buffer and OID outlive the call; `name` is an out-pointer.
        let major = unsafe { (self.import_name)(&mut minor, &buf, &oid, &mut name) };
        self.check(major, minor).map_err(|e| {
            format!(
                "Kerberos: '{}' is not a usable principal: {}",
                principal.escape_debug(),
                e.text
            )
        })?;
        Ok(Owned::of(self, name, false))
    }

    fn acquire_default(&self, name: Option<&Owned<'_>>) -> Result<Owned<'_>, GssFailure> {
        let (mut minor, mut cred) = (0, std::ptr::null_mut());
        // SAFETY: null means the default name/mechanisms; `cred` is an out-pointer.
        let major = unsafe {
            (self.acquire_cred)(
                &mut minor,
                name.map_or(std::ptr::null_mut(), |n| n.ptr),
                GSS_C_INDEFINITE,
                std::ptr::null(),
                GSS_C_INITIATE,
                &mut cred,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        self.check(major, minor)?;
        Ok(Owned::of(self, cred, true))
    }

    fn acquire_from_keytab(
        &self,
        name: Option<&Owned<'_>>,
        keytab: &std::path::Path,
        cache: &str,
    ) -> Result<Owned<'_>, GssFailure> {
        let Some(acquire_from) = self.acquire_cred_from else {
            return Err(GssFailure {
                major: 0xd_0000,
                text: "this libgssapi_krb5 has no gss_acquire_cred_from (MIT krb5 1.11 or later is needed for keytabs)".to_owned(),
            });
        };
        let invalid = |what: &str| GssFailure {
            major: 0xd_0000,
            text: format!("the {what} contains a NUL byte"),
        };
        let keytab = CString::new(keytab.as_os_str().as_encoded_bytes())
            .map_err(|_| invalid("keytab path"))?;
        let cache = CString::new(cache).map_err(|_| invalid("cache name"))?;
        let elements = [
            KeyValue {
                key: c"client_keytab".as_ptr(),
                value: keytab.as_ptr(),
            },
            KeyValue {
                key: c"ccache".as_ptr(),
                value: cache.as_ptr(),
            },
        ];
        let store = KeyValueSet {
            count: elements.len() as u32,
            elements: elements.as_ptr(),
        };
        let (mut minor, mut cred) = (0, std::ptr::null_mut());
        // SAFETY: the store and its strings outlive the call; `cred` is an out-pointer.
        let major = unsafe {
            acquire_from(
                &mut minor,
                name.map_or(std::ptr::null_mut(), |n| n.ptr),
                GSS_C_INDEFINITE,
                std::ptr::null(),
                GSS_C_INITIATE,
                &store,
                &mut cred,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        self.check(major, minor)?;
        Ok(Owned::of(self, cred, true))
    }

    /// The credential's principal and its remaining lifetime in seconds.
    fn inquire(&self, cred: &Owned<'_>) -> Result<(String, u32), GssFailure> {
        let (mut minor, mut name, mut lifetime) = (0, std::ptr::null_mut(), 0u32);
        // SAFETY: a live credential; out-pointers.
        let major = unsafe {
            (self.inquire_cred)(
                &mut minor,
                cred.ptr,
                &mut name,
                &mut lifetime,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        self.check(major, minor)?;
        let name = Owned::of(self, name, false);
        let (mut buf, mut minor) = (Buffer::empty(), 0);
        // SAFETY: a live name; the buffer is released by `take`.
        let major =
            unsafe { (self.display_name)(&mut minor, name.ptr, &mut buf, std::ptr::null_mut()) };
        self.check(major, minor)?;
        Ok((self.take(&mut buf), lifetime))
    }
}

impl Buffer {
    fn empty() -> Buffer {
        Buffer {
            length: 0,
            value: std::ptr::null_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keytab_is_checked_before_any_traffic() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let good = write(
            "ok.keytab",
            &keytab::test_keytab(&["alice@EX.COM", "bob@EX.COM"]),
        );
        let run = |keytab: &std::path::Path, origin: &str, principal: Option<(&str, &str)>| {
            let mut s = KerberosSettings {
                keytab: Some((keytab.to_owned(), origin.to_owned())),
                principal: principal.map(|(p, o)| (p.to_owned(), o.to_owned())),
                keytab_from_properties: origin.starts_with("spark."),
                principal_from_properties: principal.is_some_and(|(_, o)| o.starts_with("spark.")),
                validated: false,
            };
            let mut problems = Vec::new();
            validate(&mut s, &mut problems);
            (s, problems)
        };
        // No principal: the keytab's first; a principal it holds, realm or not.
        let (s, p) = run(&good, "--kerberos-keytab", None);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(s.principal.unwrap().0, "alice@EX.COM");
        assert!(run(
            &good,
            "--kerberos-keytab",
            Some(("bob", "--kerberos-principal"))
        )
        .1
        .is_empty());
        // A principal it lacks: named with what it holds.
        let (_, p) = run(
            &good,
            "--kerberos-keytab",
            Some(("carol@EX.COM", "--kerberos-principal")),
        );
        assert!(
            p[0].contains("has no key in the keytab") && p[0].contains("alice@EX.COM, bob@EX.COM"),
            "{p:?}"
        );
        for (name, bytes, want) in [
            ("garbage", b"garbage".to_vec(), "not a keytab"),
            ("empty", vec![5, 2], "holds no keys"),
            (
                "cut",
                keytab::test_keytab(&["alice@EX.COM"])[..30].to_vec(),
                "truncated",
            ),
        ] {
            let (_, p) = run(&write(name, &bytes), "--kerberos-keytab", None);
            assert!(p[0].contains(want), "{name}: {p:?}");
        }
        let (_, p) = run(&dir.path().join("missing"), "--kerberos-keytab", None);
        assert!(p[0].contains("cannot read keytab"), "{p:?}");
        let (_, p) = run(dir.path(), "--kerberos-keytab", None);
        assert!(p[0].contains("cannot read keytab"), "{p:?}");
        // Named only by the properties file and absent here: dropped with the
        // properties' principal, not an error.
        let (s, p) = run(
            &dir.path().join("missing"),
            "spark.kerberos.keytab in /p",
            Some(("bob@EX.COM", "spark.kerberos.principal in /p")),
        );
        assert!(p.is_empty() && s.keytab.is_none() && s.principal.is_none());
        for bad in [
            "al ice",
            "alice@",
            "alice/",
            "@EX.COM",
            "a@@EX.COM",
            "a//b@EX.COM",
        ] {
            let mut s = KerberosSettings {
                principal: Some((bad.into(), "--kerberos-principal".into())),
                ..Default::default()
            };
            let mut problems = Vec::new();
            validate(&mut s, &mut problems);
            assert!(problems[0].contains("not a Kerberos principal"), "{bad}");
        }
        for good in ["alice", "alice@EX.COM", "spark/host.ex.com@EX.COM"] {
            assert!(well_formed(good), "{good}");
        }
    }

    #[test]
    fn causes_are_named() {
        let s = KerberosSettings::default();
        let f = |major, text: &str| {
            explain(
                &GssFailure {
                    major,
                    text: text.to_owned(),
                },
                &s,
                "keytab /k",
            )
        };
        assert!(f(0xb_0000, "The referenced credential has expired").contains("have expired"));
        assert!(f(0x7_0000, "Preauthentication failed").contains("does not accept the key"));
        assert!(f(0x7_0000, "Cannot contact any KDC for realm 'R'").contains("no KDC"));
        assert!(f(0xd_0000, "Clock skew too great").contains("clock"));
    }
}

//! Keeps the secure port's certificates and CAs current, as upstream's dynamic certificate
//! controllers do: files are re-read on change (file events in their directories) and every
//! minute; the cluster's `extension-apiserver-authentication` ConfigMap is watched. A file or
//! key that fails to load keeps the previous one in use, with a log line and
//! `kcm_serving_reload_errors_total{file}`; what loads is swapped in for new connections.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use prometheus::IntCounterVec;
use rustls::pki_types::CertificateDer;
use rustls::sign::CertifiedKey;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::identity::HeaderNames;
use super::options::{NamedCertKey, RequestHeaderOptions, TlsOptions};
use super::tls::{
    self, Current, Material, RequestHeader, ServingCert, SniCert, TlsConfig, TlsError,
};

/// Upstream's `FileRefreshDuration`.
pub const POLL: Duration = Duration::from_secs(60);

/// File events come in bursts (truncate, write, rename): the files are read once the burst
/// has been quiet this long, so a half-written file is not taken for a broken one.
const SETTLE: Duration = Duration::from_millis(200);

/// Where the ConfigMap's keys are reported in logs and the metric's `file` label.
const CONFIGMAP: &str = "configmap/kube-system/extension-apiserver-authentication";

/// The files the secure port reads, and whether the ConfigMap supplies the client CA and
/// the front-proxy settings.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// `None`: the serving certificate was generated in memory and never changes.
    pub serving: Option<(PathBuf, PathBuf)>,
    pub sni: Vec<NamedCertKey>,
    pub client_ca_file: Option<PathBuf>,
    /// From the flags, when `--requestheader-client-ca-file` is given.
    pub request_header: Option<RequestHeaderOptions>,
    pub client_ca_from_cluster: bool,
    pub request_header_from_cluster: bool,
}

/// What changed, for the reload loop.
#[derive(Debug)]
pub enum Trigger {
    Files,
    /// The ConfigMap's data (`None`: it was deleted or does not exist).
    ConfigMap(Option<BTreeMap<String, String>>),
}

/// The loaded material and how it was read, so a reload only swaps in what changed.
pub struct Reloader {
    sources: Sources,
    options: TlsOptions,
    sessions: Arc<dyn rustls::server::StoresServerSessions>,
    material: Material,
    /// Each file's (or pair's) bytes at its last load attempt, by metric label.
    seen: HashMap<String, Vec<u8>>,
    /// The ConfigMap's data at its last load attempt.
    configmap: Option<BTreeMap<String, String>>,
    errors: IntCounterVec,
}

impl Reloader {
    /// Loads every file; at start a failure is fatal, as upstream's.
    pub fn start(
        sources: Sources,
        options: TlsOptions,
        generated: Option<ServingCert>,
        errors: IntCounterVec,
    ) -> Result<Self, TlsError> {
        let mut seen = HashMap::new();
        let serving = match (&sources.serving, generated) {
            (Some((cert, key)), _) => load_pair(cert, key, &mut seen)?,
            (None, Some(generated)) => generated.certified(Path::new("generated key"))?,
            (None, None) => return Err(TlsError::NoCertificate("the secure port".into())),
        };
        let sni = sources
            .sni
            .iter()
            .map(|nck| {
                Ok(SniCert {
                    names: nck.names.clone(),
                    key: load_pair(&nck.cert, &nck.key, &mut seen)?,
                })
            })
            .collect::<Result<Vec<_>, TlsError>>()?;
        let client_ca = sources
            .client_ca_file
            .as_deref()
            .map(|path| load_ca(path, &mut seen))
            .transpose()?;
        let request_header = sources
            .request_header
            .as_ref()
            .map(|rh| {
                let path = rh.client_ca_file.as_deref().unwrap_or(Path::new(""));
                Ok::<_, TlsError>(RequestHeader {
                    ca: load_ca(path, &mut seen)?,
                    names: Arc::new(header_names_from_flags(rh)),
                })
            })
            .transpose()?;
        let material = Material {
            serving,
            sni,
            client_ca,
            request_header,
        };
        Ok(Self {
            sources,
            options,
            // Shared by every configuration built, so a reload does not end session resumption.
            sessions: rustls::server::ServerSessionMemoryCache::new(256),
            material,
            seen,
            configmap: None,
            errors,
        })
    }

    /// The TLS configuration of the material loaded now.
    pub fn config(&self) -> Result<TlsConfig, TlsError> {
        TlsConfig::build(&self.material, &self.options, &self.sessions)
    }

    /// The files to watch.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = self.seen.keys().map(PathBuf::from).collect();
        for nck in &self.sources.sni {
            files.push(nck.key.clone());
        }
        if let Some((_, key)) = &self.sources.serving {
            files.push(key.clone());
        }
        files
    }

    fn failed(&self, file: &str, err: &dyn std::fmt::Display) {
        tracing::error!(file, error = %err, "cannot reload; the previous certificate or CA stays in use");
        self.errors.with_label_values(&[file]).inc();
    }

    /// Whether `label`'s bytes differ from the last attempt; records them.
    fn changed(&mut self, label: &str, bytes: Vec<u8>) -> bool {
        if self.seen.get(label) == Some(&bytes) {
            return false;
        }
        self.seen.insert(label.to_string(), bytes);
        true
    }

    /// Re-reads a pair: `Some` when it changed and loads; `None` when unchanged or broken
    /// (reported).
    fn reload_pair(&mut self, cert: &Path, key: &Path) -> Option<Arc<CertifiedKey>> {
        let label = cert.display().to_string();
        let bytes = match (tls::read_file(cert), tls::read_file(key)) {
            (Ok(mut c), Ok(k)) => {
                c.extend_from_slice(&k);
                c
            }
            (Err(err), _) | (_, Err(err)) => {
                self.failed(&label, &err);
                return None;
            }
        };
        if !self.changed(&label, bytes) {
            return None;
        }
        match ServingCert::from_files(cert, key).and_then(|c| c.certified(key)) {
            Ok(loaded) => {
                tracing::info!(cert = %cert.display(), key = %key.display(), "loaded a new serving certificate");
                Some(loaded)
            }
            Err(err) => {
                self.failed(&label, &err);
                None
            }
        }
    }

    fn reload_ca(&mut self, path: &Path) -> Option<Vec<CertificateDer<'static>>> {
        let label = path.display().to_string();
        let bytes = match tls::read_file(path) {
            Ok(bytes) => bytes,
            Err(err) => {
                self.failed(&label, &err);
                return None;
            }
        };
        if !self.changed(&label, bytes.clone()) {
            return None;
        }
        match tls::parse_ca_bundle(&label, &bytes) {
            Ok(cas) => {
                tracing::info!(file = label, "loaded a new CA bundle");
                Some(cas)
            }
            Err(err) => {
                self.failed(&label, &err);
                None
            }
        }
    }

    /// Re-reads every file; true when something new loaded.
    fn reload_files(&mut self) -> bool {
        let mut changed = false;
        if let Some((cert, key)) = self.sources.serving.clone()
            && let Some(loaded) = self.reload_pair(&cert, &key)
        {
            self.material.serving = loaded;
            changed = true;
        }
        for (i, nck) in self.sources.sni.clone().iter().enumerate() {
            if let Some(loaded) = self.reload_pair(&nck.cert, &nck.key) {
                self.material.sni[i].key = loaded;
                changed = true;
            }
        }
        if let Some(path) = self.sources.client_ca_file.clone()
            && let Some(cas) = self.reload_ca(&path)
        {
            self.material.client_ca = Some(cas);
            changed = true;
        }
        if let Some(path) = self
            .sources
            .request_header
            .as_ref()
            .and_then(|rh| rh.client_ca_file.clone())
            && let Some(cas) = self.reload_ca(&path)
            && let Some(rh) = &mut self.material.request_header
        {
            rh.ca = cas;
            changed = true;
        }
        changed
    }

    /// Takes the ConfigMap's client CA and front-proxy settings where the flags do not give
    /// them; true when something changed.
    pub fn apply_configmap(&mut self, data: Option<BTreeMap<String, String>>) -> bool {
        if self.configmap == data {
            return false;
        }
        let data_ref = data.clone().unwrap_or_default();
        self.configmap = data;
        let mut changed = false;
        if self.sources.client_ca_from_cluster {
            let label = format!("{CONFIGMAP}/client-ca-file");
            let client_ca = match data_ref.get("client-ca-file").filter(|p| !p.is_empty()) {
                None => Ok(None),
                Some(pem) => tls::parse_ca_bundle(&label, pem.as_bytes()).map(Some),
            };
            match client_ca {
                Ok(client_ca) if client_ca != self.material.client_ca => {
                    if client_ca.is_none() {
                        tracing::warn!(
                            "{CONFIGMAP} has no client-ca-file: client certificate authentication is off"
                        );
                    }
                    self.material.client_ca = client_ca;
                    changed = true;
                }
                Ok(_) => {}
                Err(err) => self.failed(&label, &err),
            }
        }
        if self.sources.request_header_from_cluster {
            match request_header_from_configmap(&data_ref) {
                Ok(rh) => {
                    let same = match (&rh, &self.material.request_header) {
                        (None, None) => true,
                        (Some(new), Some(old)) => new.ca == old.ca && new.names == old.names,
                        _ => false,
                    };
                    if !same {
                        if rh.is_none() {
                            tracing::warn!(
                                "{CONFIGMAP} has no requestheader-client-ca-file: request-header client certificate authentication is off"
                            );
                        }
                        self.material.request_header = rh;
                        changed = true;
                    }
                }
                Err((key, err)) => self.failed(&format!("{CONFIGMAP}/{key}"), &err),
            }
        }
        changed
    }

    /// Builds and swaps in a new configuration from the material.
    fn swap(&self, current: &Current) {
        match self.config() {
            Ok(config) => tls::swap(current, config),
            Err(err) => self.failed("tls-configuration", &err),
        }
    }

    /// Reloads on every trigger and every [`POLL`] until `shutdown`.
    pub async fn run(
        mut self,
        current: Current,
        mut triggers: mpsc::Receiver<Trigger>,
        shutdown: CancellationToken,
    ) {
        let mut poll = tokio::time::interval(POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        poll.tick().await;
        loop {
            let trigger = tokio::select! {
                () = shutdown.cancelled() => return,
                _ = poll.tick() => Trigger::Files,
                trigger = triggers.recv() => match trigger {
                    Some(trigger) => trigger,
                    None => return,
                },
            };
            let changed = match trigger {
                Trigger::Files => {
                    // Let the burst of events settle; later file events are covered by this read.
                    tokio::time::sleep(SETTLE).await;
                    let mut configmap = None;
                    while let Ok(more) = triggers.try_recv() {
                        if let Trigger::ConfigMap(data) = more {
                            configmap = Some(data);
                        }
                    }
                    let files = self.reload_files();
                    let cluster = configmap.is_some_and(|data| self.apply_configmap(data));
                    files || cluster
                }
                Trigger::ConfigMap(data) => self.apply_configmap(data),
            };
            if changed {
                self.swap(&current);
            }
        }
    }
}

fn load_pair(
    cert: &Path,
    key: &Path,
    seen: &mut HashMap<String, Vec<u8>>,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let cert_pem = tls::read_file(cert)?;
    let key_pem = tls::read_file(key)?;
    let loaded = ServingCert::from_pem(cert, &cert_pem, key, &key_pem)?.certified(key)?;
    let mut bytes = cert_pem;
    bytes.extend_from_slice(&key_pem);
    seen.insert(cert.display().to_string(), bytes);
    Ok(loaded)
}

fn load_ca(
    path: &Path,
    seen: &mut HashMap<String, Vec<u8>>,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let label = path.display().to_string();
    let bytes = tls::read_file(path)?;
    let cas = tls::parse_ca_bundle(&label, &bytes)?;
    seen.insert(label, bytes);
    Ok(cas)
}

fn header_names_from_flags(options: &RequestHeaderOptions) -> HeaderNames {
    HeaderNames {
        username: options.username_headers.clone(),
        uid: options.uid_headers.clone(),
        group: options.group_headers.clone(),
        extra_prefix: options.extra_headers_prefix.clone(),
        allowed_names: options.allowed_names.clone(),
    }
}

/// Upstream's `RequestHeaderAuthRequestController` reading of the ConfigMap: the CA, and
/// the header lists as JSON arrays of strings (absent or empty: none). `Err((key, why))`.
fn request_header_from_configmap(
    data: &BTreeMap<String, String>,
) -> Result<Option<RequestHeader>, (&'static str, String)> {
    const CA: &str = "requestheader-client-ca-file";
    let Some(pem) = data.get(CA).filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let ca = tls::parse_ca_bundle(CA, pem.as_bytes()).map_err(|e| (CA, e.to_string()))?;
    let list = |key: &'static str| -> Result<Vec<String>, (&'static str, String)> {
        match data.get(key).filter(|v| !v.is_empty()) {
            None => Ok(Vec::new()),
            Some(json) => serde_json::from_str(json).map_err(|e| (key, e.to_string())),
        }
    };
    Ok(Some(RequestHeader {
        ca,
        names: Arc::new(HeaderNames {
            username: list("requestheader-username-headers")?,
            uid: list("requestheader-uid-headers")?,
            group: list("requestheader-group-headers")?,
            extra_prefix: list("requestheader-extra-headers-prefix")?,
            allowed_names: list("requestheader-allowed-names")?,
        }),
    }))
}

/// Sends [`Trigger::Files`] on any event in the directories of `files` (a Secret or
/// ConfigMap volume swaps a `..data` link there, not the file itself). The watcher stops when
/// dropped; `None` when file events are not available (the minute poll still runs).
pub fn watch_files(
    files: &[PathBuf],
    tx: mpsc::Sender<Trigger>,
) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let mut watcher = match notify::recommended_watcher(
        move |event: notify::Result<notify::Event>| {
            if event.is_ok() {
                // Full: a reload is pending already, and it reads everything.
                let _ = tx.try_send(Trigger::Files);
            }
        },
    ) {
        Ok(watcher) => watcher,
        Err(err) => {
            tracing::warn!(error = %err, "no file events: certificates and CAs are re-read every minute only");
            return None;
        }
    };
    let mut dirs: Vec<PathBuf> = files
        .iter()
        .map(|f| match f.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        if let Err(err) = watcher.watch(&dir, notify::RecursiveMode::NonRecursive) {
            tracing::warn!(dir = %dir.display(), error = %err, "cannot watch for file events: re-read every minute only");
        }
    }
    Some(watcher)
}

/// Watches the ConfigMap (by name: `extension-apiserver-authentication-reader` grants list
/// and watch of it alone) and sends its data on every change.
pub async fn watch_configmap(
    client: kube::Client,
    tx: mpsc::Sender<Trigger>,
    shutdown: CancellationToken,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, "kube-system");
    let config =
        watcher::Config::default().fields("metadata.name=extension-apiserver-authentication");
    let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.next() => event,
        };
        let data = match event {
            None => return,
            Some(Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm))) => {
                Some(cm.data.unwrap_or_default())
            }
            Some(Ok(watcher::Event::Delete(_))) => None,
            Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => continue,
            Some(Err(err)) => {
                tracing::warn!(error = %err, "watching {CONFIGMAP} failed; retrying");
                continue;
            }
        };
        if tx.send(Trigger::ConfigMap(data)).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configmap_header_lists_are_json_arrays() {
        let ca = rcgen::CertificateParams::default()
            .self_signed(&rcgen::KeyPair::generate().unwrap())
            .unwrap()
            .pem();
        let data = BTreeMap::from([
            ("requestheader-client-ca-file".to_string(), ca),
            (
                "requestheader-username-headers".to_string(),
                r#"["X-Remote-User"]"#.to_string(),
            ),
            (
                "requestheader-allowed-names".to_string(),
                r#"["front-proxy-client"]"#.to_string(),
            ),
            ("requestheader-group-headers".to_string(), String::new()),
        ]);
        let rh = request_header_from_configmap(&data).unwrap().unwrap();
        assert_eq!(rh.names.username, ["X-Remote-User"]);
        assert_eq!(rh.names.allowed_names, ["front-proxy-client"]);
        assert!(rh.names.group.is_empty());
        let mut broken = data.clone();
        broken.insert("requestheader-uid-headers".into(), "X-Remote-Uid".into());
        let (key, _) = request_header_from_configmap(&broken).err().unwrap();
        assert_eq!(key, "requestheader-uid-headers");
        assert!(
            request_header_from_configmap(&BTreeMap::new())
                .unwrap()
                .is_none()
        );
    }
}

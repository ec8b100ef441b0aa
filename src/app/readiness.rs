//! Whether this replica is ready, as `/readyz` answers it: a standby once the stores it keeps
//! warm have synced, a leader once each of its controllers has started (or been found to lack
//! its API) and every store they read has synced.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::lock::lock;
use crate::runtime::startup::Startup;
use crate::runtime::watching::informer::Informers;
use crate::serving;

/// Where this replica stands, as `/readyz` answers it. A standby is ready once the stores it
/// keeps warm have synced (a cold one holds none); a leader is ready once every enabled
/// controller has started or been found to lack its API, and every store the started ones
/// read has synced.
#[derive(Clone)]
pub(super) struct Standing {
    informers: Informers,
    pub(super) leading: Arc<AtomicBool>,
    /// The leader's controllers; `None` until they are being started.
    progress: Arc<Mutex<Option<Progress>>>,
}

impl Standing {
    pub(super) fn new(informers: Informers) -> Self {
        Self {
            informers,
            leading: Arc::default(),
            progress: Arc::default(),
        }
    }

    pub(super) fn readiness(&self) -> serving::Readiness {
        let standing = self.clone();
        Arc::new(move || standing.ready())
    }

    fn ready(&self) -> Result<(), serving::NotReady> {
        if !self.leading.load(Ordering::SeqCst) {
            let unsynced = self.informers.unsynced();
            return match unsynced.is_empty() {
                true => Ok(()),
                false => Err(serving::NotReady::StoresNotSynced(unsynced)),
            };
        }
        // Until the controllers are being started their stores may not even be registered.
        let progress = lock(&self.progress);
        let Some(progress) = progress.as_ref() else {
            return Err(serving::NotReady::ControllersStarting);
        };
        if !progress.discovering.is_empty() {
            return Err(serving::NotReady::DiscoveryPending(
                progress
                    .discovering
                    .iter()
                    .map(|(name, api)| format!("{name} ({api})"))
                    .collect(),
            ));
        }
        let unsynced = self.informers.unsynced();
        if !unsynced.is_empty() {
            return Err(serving::NotReady::StoresNotSynced(unsynced));
        }
        let pending: Vec<&'static str> = progress
            .started
            .iter()
            .filter(|s| !s.is_synced())
            .map(Startup::controller)
            .collect();
        if pending.is_empty() {
            Ok(())
        } else {
            Err(serving::NotReady::ControllersNotSynced(pending))
        }
    }

    pub(super) fn set_leading(&self, leading: bool) {
        self.leading.store(leading, Ordering::SeqCst);
    }

    /// The leader's controllers as they are first started.
    pub(super) fn set_progress(&self, progress: Progress) {
        *lock(&self.progress) = Some(progress);
    }

    /// Whether every controller's API has been found served or not.
    pub(super) fn discovered(&self) -> bool {
        lock(&self.progress)
            .as_ref()
            .is_some_and(|p| p.discovering.is_empty())
    }

    /// Whether discovery has yet to answer for the controller `name` for the first time.
    pub(super) fn is_discovering(&self, name: &str) -> bool {
        lock(&self.progress)
            .as_ref()
            .is_some_and(|p| p.discovering.contains_key(name))
    }

    /// The controller `name` lacks its API: no longer pending. Returns the API, if it was.
    pub(super) fn not_served(&self, name: &str) -> Option<String> {
        lock(&self.progress)
            .as_mut()
            .and_then(|p| p.discovering.remove(name))
    }

    /// The controller `name` has started, its API found served.
    pub(super) fn started(&self, name: &str, startup: Startup) {
        let mut progress = lock(&self.progress);
        let progress = progress.get_or_insert_default();
        progress.discovering.remove(name);
        progress.started.push(startup);
    }
}

/// Where the leader's controllers stand, for readiness: none is pending once each has
/// started or been found to lack its API.
#[derive(Default)]
pub(super) struct Progress {
    /// Controllers waiting for discovery, with the API they need.
    pub(super) discovering: BTreeMap<&'static str, String>,
    pub(super) started: Vec<Startup>,
}

//! Which of the enabled controllers' APIs the cluster serves: a controller that needs an API
//! starts only once discovery finds it served, instead of crash-looping without it.

use std::collections::BTreeMap;

use kube::Client;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::connection::Connection;
use crate::controllers::Descriptor;
use crate::runtime::connection::discovery::{self, Timing};

/// One answer of discovery: whether a controller's API is served.
pub(super) type Answer = (&'static Descriptor, Found);

/// Discovery of the APIs the enabled controllers need, asked once: by a warm standby while it
/// waits (reads only), else when leading. Each controller's API is asked on its own, so no
/// answer holds up another; one found not served is asked again until it is.
pub(super) struct Discovery {
    pub(super) enabled: Vec<&'static Descriptor>,
    client: Client,
    /// Ends discovery, with the controllers.
    cancelled: CancellationToken,
    found: mpsc::UnboundedSender<Answer>,
    pub(super) answers: mpsc::UnboundedReceiver<Answer>,
    /// The APIs asked for, by controller; `None` until asked.
    asked: Option<BTreeMap<&'static str, String>>,
}

impl Discovery {
    pub(super) fn new(enabled: &[&'static Descriptor], connection: &Connection) -> Self {
        let (found, answers) = mpsc::unbounded_channel();
        Self {
            enabled: enabled.to_vec(),
            client: connection.discovery_client.clone(),
            cancelled: connection.controllers_stop.clone(),
            found,
            answers,
            asked: None,
        }
    }

    /// Asks for each enabled controller's API (those that need one), unless asked already.
    pub(super) fn start(&mut self) {
        if self.asked.is_none() {
            self.asked = Some(self.ask());
        }
    }

    /// The APIs asked for, by controller, asking now if no one has.
    pub(super) fn asked(&mut self) -> BTreeMap<&'static str, String> {
        self.start();
        self.asked.clone().unwrap_or_default()
    }

    /// Puts answers already received back, ahead of those still to come.
    pub(super) fn hand_back(&self, answers: Vec<Answer>) {
        for answer in answers {
            let _ = self.found.send(answer);
        }
    }

    fn ask(&self) -> BTreeMap<&'static str, String> {
        let mut discovering = BTreeMap::new();
        for &entry in &self.enabled {
            let Some((group, version)) = entry.api else {
                continue;
            };
            let api = if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}/{version}")
            };
            discovering.insert(entry.name, api.clone());
            let client = self.client.clone();
            let found = self.found.clone();
            let cancelled = self.cancelled.clone();
            tokio::spawn(async move {
                let skipped = found.clone();
                let served = discovery::until_served(
                    &api,
                    Timing::default(),
                    || discovery::probe(&client, group, version),
                    move || {
                        let _ = skipped.send((entry, Found::NotServed));
                    },
                );
                tokio::select! {
                    () = cancelled.cancelled() => {}
                    () = served => {
                        let _ = found.send((entry, Found::Served));
                    }
                }
            });
        }
        discovering
    }
}

/// What discovery found for a controller's API.
#[derive(Debug, Clone, Copy)]
pub(super) enum Found {
    Served,
    /// Found not served; discovery keeps checking and sends `Served` if that changes.
    NotServed,
}

//! Leading: waiting for the lease (a warm standby meanwhile keeps synced the stores of every
//! controller it can start), renewing it while the controllers run, handing it over at a
//! clean stop.

use prometheus::IntGauge;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::connection::Connection;
use super::discovery::{Answer, Discovery, Found};
use super::error::AppError;
use crate::controllers::Descriptor;
use crate::runtime::leader::{LeaderElectionConfig, LeaderElector};
use crate::runtime::metrics::ReplicaState;
use crate::runtime::watching::informer::Informers;
use crate::settings::Settings;

/// Waits to lead, with `--leader-elect`; without it, leads at once. A warm standby meanwhile
/// keeps the stores of every controller it can start synced ([`warm_standby`]); a cold one
/// holds nothing and asks nothing. `None`: stopped before the lease was acquired.
pub(super) async fn lead(
    settings: &Settings,
    connection: &Connection,
    identity: &str,
    discovery: &mut Discovery,
    stop: &CancellationToken,
) -> Result<Option<Lease>, AppError> {
    let Some(election) = &settings.leader_election else {
        // Without leader election upstream exports no `leader_election_master_status` series.
        return Ok(Some(Lease {
            elector: None,
            gauge: None,
        }));
    };
    let elector = LeaderElector::new(
        connection.clients.client("leader-election")?,
        LeaderElectionConfig {
            namespace: election.resource_namespace.clone(),
            name: election.resource_name.clone(),
            identity: identity.to_string(),
            lease_duration: election.lease_duration,
            renew_deadline: election.renew_deadline,
            retry_period: election.retry_period,
        },
    );
    let lease_name = election.resource_name.as_str();
    let gauge = connection.metrics.leader.with_label_values(&[lease_name]);
    let warm = election.warm_standby;
    tracing::info!(
        identity,
        lease = lease_name,
        warm,
        "waiting to acquire the leader lease"
    );
    let stop_wait = stop.clone();
    let acquire = elector.acquire(async move { stop_wait.cancelled().await });
    let acquired = if warm {
        connection
            .metrics
            .set_replica_state(ReplicaState::WarmStandby);
        warm_standby(acquire, settings, &connection.informers, discovery).await
    } else {
        connection
            .metrics
            .set_replica_state(ReplicaState::ColdStandby);
        acquire.await
    };
    if !acquired.map_err(|e| AppError::Leader(e.to_string()))? {
        return Ok(None);
    }
    gauge.set(1);
    Ok(Some(Lease {
        elector: Some(elector),
        gauge: Some(gauge),
    }))
}

/// A warm standby's wait for `acquire`: the stores of the controllers that need no API are
/// synced at once, and discovery is asked, so each controller found served is warmed as the
/// answer comes. The answers go back to `discovery`, for the leader to act on.
async fn warm_standby<T>(
    acquire: impl Future<Output = T>,
    settings: &Settings,
    informers: &Informers,
    discovery: &mut Discovery,
) -> T {
    for entry in discovery.enabled.iter().filter(|entry| entry.api.is_none()) {
        (entry.warm)(informers, settings);
    }
    discovery.start();
    let (acquired, answers) = warm_until(acquire, &mut discovery.answers, |entry| {
        (entry.warm)(informers, settings)
    })
    .await;
    discovery.hand_back(answers);
    acquired
}

/// A warm standby's wait for the lease: each controller discovery finds served is warmed
/// meanwhile. Returns the outcome of `acquire` and every discovery answer received, in
/// order, for the leader to act on.
async fn warm_until<T>(
    acquire: impl Future<Output = T>,
    found: &mut mpsc::UnboundedReceiver<Answer>,
    mut warm: impl FnMut(&'static Descriptor),
) -> (T, Vec<Answer>) {
    let mut answers = Vec::new();
    let mut answered = |(entry, answer): Answer| {
        if matches!(answer, Found::Served) {
            tracing::info!(controller = %entry.controller, "the cluster serves the controller's API; warming its stores");
            warm(entry);
        }
        answers.push((entry, answer));
    };
    tokio::pin!(acquire);
    let acquired = loop {
        tokio::select! {
            acquired = &mut acquire => break acquired,
            Some(answer) = found.recv() => answered(answer),
        }
    };
    // Those already sent, too, so that every answer handed back precedes any later one.
    while let Ok(answer) = found.try_recv() {
        answered(answer);
    }
    (acquired, answers)
}

/// The lease this replica leads under, and the gauge that says it leads (neither without
/// `--leader-elect`).
pub(super) struct Lease {
    elector: Option<LeaderElector>,
    gauge: Option<IntGauge>,
}

impl Lease {
    /// Renews the lease from now on in a task of its own, so slow controller starts
    /// (ServiceAccount retries, --controller-start-interval) never delay a renewal.
    pub(super) fn hold(self) -> Held {
        let Lease { elector, gauge } = self;
        let (release, released) = oneshot::channel::<()>();
        let renewals = AbortOnDropHandle::new(tokio::spawn(async move {
            match elector {
                Some(elector) => elector
                    .hold(async move {
                        let _ = released.await;
                    })
                    .await
                    .map_err(|e| AppError::Leader(e.to_string())),
                None => {
                    let _ = released.await;
                    Ok(())
                }
            }
        }));
        Held {
            renewals,
            release,
            gauge,
        }
    }
}

/// A lease being renewed; dropping it (any early return) stops the renewals.
pub(super) struct Held {
    /// Ends when the lease is lost, or released.
    renewals: AbortOnDropHandle<Result<(), AppError>>,
    release: oneshot::Sender<()>,
    gauge: Option<IntGauge>,
}

impl Held {
    /// After a clean stop, hands the lease over at once instead of making the next leader
    /// wait it out.
    pub(super) async fn release(self, clean: bool) {
        if clean {
            let _ = self.release.send(());
            if let Err(err) = held(self.renewals.await) {
                tracing::warn!(error = %err, "releasing the lease failed");
            }
        }
        if let Some(gauge) = &self.gauge {
            gauge.set(0);
        }
    }

    /// Resolves if the renewals end while the controllers run: the lease is lost.
    pub(super) async fn lost(&mut self) -> AppError {
        held((&mut self.renewals).await)
            .err()
            .unwrap_or_else(|| AppError::Leader("lease released unexpectedly".into()))
    }
}

/// The outcome of the lease-holding task.
fn held(outcome: Result<Result<(), AppError>, JoinError>) -> Result<(), AppError> {
    outcome.unwrap_or_else(|join| Err(AppError::Leader(join.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::Controller;

    #[tokio::test(start_paused = true)]
    async fn a_standby_warms_what_is_served_and_hands_every_answer_on_in_order() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (claims, pdbs) = (
            Controller::ResourceClaim.descriptor(),
            Controller::Disruption.descriptor(),
        );
        tx.send((claims, Found::NotServed)).unwrap();
        tx.send((pdbs, Found::Served)).unwrap();
        let (lease_tx, lease_rx) = tokio::sync::oneshot::channel::<bool>();
        let mut warmed = Vec::new();
        let waiting = warm_until(async { lease_rx.await.unwrap() }, &mut rx, |entry| {
            warmed.push(entry.name)
        });
        // The lease comes with an answer still queued: it is handed on after the others.
        let acquire = async {
            tokio::task::yield_now().await;
            tx.send((claims, Found::Served)).unwrap();
            lease_tx.send(true).unwrap();
        };
        let ((acquired, answers), ()) = tokio::join!(waiting, acquire);
        assert!(acquired);
        assert_eq!(
            warmed,
            ["disruption-controller", "resourceclaim-controller"]
        );
        let order: Vec<(&str, bool)> = answers
            .iter()
            .map(|(entry, found)| (entry.name, matches!(found, Found::Served)))
            .collect();
        assert_eq!(
            order,
            [
                ("resourceclaim-controller", false),
                ("disruption-controller", true),
                ("resourceclaim-controller", true),
            ]
        );
    }
}

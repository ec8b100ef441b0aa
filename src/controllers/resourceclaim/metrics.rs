//! The scrape-time claim gauge, counted from the shared claim store rather than kept
//! up to date on every event.

use k8s_openapi::api::resource::v1::ResourceClaim;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntGaugeVec, Opts};

use super::plan::claims::gauge_labels;
use crate::runtime::watching::informer::Store;

/// `resourceclaim_controller_resource_claims`: claims by allocated, admin_access and source,
/// counted from the shared store at scrape time, as upstream's custom collector does.
pub(super) struct ClaimGauge {
    store: Store<ResourceClaim>,
    template: IntGaugeVec,
}

impl ClaimGauge {
    pub(super) fn new(store: Store<ResourceClaim>) -> prometheus::Result<Self> {
        Ok(Self {
            store,
            template: Self::vec()?,
        })
    }

    fn vec() -> prometheus::Result<IntGaugeVec> {
        IntGaugeVec::new(
            Opts::new(
                "resourceclaim_controller_resource_claims",
                "Number of ResourceClaims, by allocated, admin_access and source.",
            ),
            &["allocated", "admin_access", "source"],
        )
    }
}

impl Collector for ClaimGauge {
    fn desc(&self) -> Vec<&Desc> {
        self.template.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Ok(gauge) = Self::vec() else {
            return Vec::new();
        };
        for claim in self.store.state() {
            gauge.with_label_values(&gauge_labels(&claim)).inc();
        }
        gauge.collect()
    }
}

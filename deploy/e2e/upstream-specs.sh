#!/usr/bin/env bash
# Runs Kubernetes' own e2e specs for the five controllers kcm replaces (ResourceQuota,
# DisruptionController with its evictions, DRA's control-plane specs, StorageVersion GC)
# against a cluster where kcm runs them in place of kube-controller-manager.
#
#   deploy/e2e/upstream-specs.sh E2E_TEST KUBECONFIG [extra e2e.test flags...]
#
# E2E_TEST is the `e2e.test` binary of the cluster's release (v1.36: from
# kubernetes-test-linux-amd64.tar.gz, or built with `make WHAT=test/e2e/e2e.test`).
# KCM_E2E_FOCUS / KCM_E2E_SKIP override the specs chosen below.
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,11p' "$0" >&2
  exit 2
fi
e2e=$1 kubeconfig=$2
shift 2

# The specs of the five controllers, by their Describe names in test/e2e.
focus=${KCM_E2E_FOCUS:-'\[sig-api-machinery\] ResourceQuota|\[sig-apps\] DisruptionController|\[sig-api-machinery\] StorageVersion resources|\[DRA\] control plane'}
# Left out: specs of features that are off by default in v1.36 (their gates would have to be
# on in the API server too), and specs that need a real container runtime or a cloud.
skip=${KCM_E2E_SKIP:-'\[Feature:VolumeAttributesClass\]|\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Slow\]|\[Alpha\]|\[Beta\]|FeatureGate:.*Beta|FeatureGate:.*Alpha'}

exec "$e2e" \
  --kubeconfig="$kubeconfig" \
  --provider=skeleton \
  --ginkgo.focus="$focus" \
  --ginkgo.skip="$skip" \
  --ginkgo.no-color \
  --ginkgo.v \
  "$@"

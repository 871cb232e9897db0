#pragma once
// One /metrics reading as the remote engine view draws it: gauges as read, rates and latency
// quantiles over the interval since the previous reading (counter and bucket differences,
// so they follow what the server does now, as a Grafana rate() panel does).
#include "app/remote/metrics_poller.h"
#include "ui/remote_metrics_point.h"

namespace kvs::remote {

// prev: the previous reading of the same server (nullptr for the first).
ui::RemoteMetricsPoint to_view_point(const MetricsReading& cur, const MetricsReading* prev);

// The histogram of the observations between two readings (bucket by bucket differences;
// the current one alone when the previous is missing or the server restarted).
PromHistogram histogram_delta(const PromHistogram& cur, const PromHistogram* prev);

}  // namespace kvs::remote

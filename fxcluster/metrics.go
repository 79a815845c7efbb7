package fxcluster

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fxkube/fxkube/fxstore"
)

var (
	stateDesc = prometheus.NewDesc("fxkube_cluster_state",
		"1 for the member cluster's current state (joining, ready, failing, failed or leaving), 0 for the others.", []string{"cluster", "state"}, nil)
	sinceDesc = prometheus.NewDesc("fxkube_cluster_state_since_timestamp_seconds",
		"When the member cluster entered its current state, in seconds since the Unix epoch.", []string{"cluster"}, nil)
	joinsDesc = prometheus.NewDesc("fxkube_cluster_joins_total",
		"Attempts of the member cluster to join since it was engaged, by result: joined or failed. The attempt in flight counts in neither.", []string{"cluster", "result"}, nil)
)

// states are every State, in the order their gauges are reported.
var states = []State{Joining, Ready, Failing, Failed, Leaving}

// clusterMetrics collects the members' states and attempts.
type clusterMetrics struct{ f *Fleet }

// Describe implements prometheus.Collector.
func (c clusterMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- stateDesc
	ch <- sinceDesc
	ch <- joinsDesc
}

// Collect implements prometheus.Collector.
func (c clusterMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, info := range c.f.Clusters() {
		name := string(info.Name)
		for _, st := range states {
			v := 0.0
			if info.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, v, name, string(st))
		}
		ch <- prometheus.MustNewConstMetric(sinceDesc, prometheus.GaugeValue, float64(info.Since.UnixNano())/1e9, name)
		joined, failed := joinResults(info)
		ch <- prometheus.MustNewConstMetric(joinsDesc, prometheus.CounterValue, float64(joined), name, "joined")
		ch <- prometheus.MustNewConstMetric(joinsDesc, prometheus.CounterValue, float64(failed), name, "failed")
	}
}

// joinResults counts a member's attempts that ended: a member that has
// joined did so at its last attempt, and only a failed member's last
// attempt has failed.
func joinResults(info ClusterInfo) (joined, failed int) {
	switch info.State {
	case Ready, Failing, Leaving:
		return 1, info.Attempts - 1
	case Failed:
		return 0, info.Attempts
	default: // Joining: the attempt is in flight.
		return 0, max(info.Attempts-1, 0)
	}
}

// storeMetrics collects the metrics of the members' stores, of the fleet
// attached: fxstore's, labelled with the member's name as "cluster".
//
// It is an unchecked collector (its Describe sends nothing): its
// descriptors are fxstore's, which the app's own registry has registered
// already, and the registry refuses a second collector of them. The label
// tells the members apart: without it, the samples of fxstore's metrics
// without labels (fxkube_stores_started_total) would repeat, and the whole
// scrape would fail. An unchecked collector cannot be unregistered: the
// process has one, registered once, to which a fleet attaches while it
// runs.
type storeMetrics struct {
	mu sync.Mutex
	f  *Fleet // nil: none attached
}

// memberStores is the process's storeMetrics, in controller-runtime's
// registry once a fleet with providers has started.
var (
	memberStores         = &storeMetrics{}
	registerMemberStores = sync.OnceValue(func() error { return metrics.Registry.Register(memberStores) })
)

// attach makes s collect f's members' metrics, unless it collects
// another fleet's.
func (s *storeMetrics) attach(f *Fleet) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		return false
	}
	s.f = f
	return true
}

// detach stops s collecting f's.
func (s *storeMetrics) detach(f *Fleet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == f {
		s.f = nil
	}
}

// Describe implements prometheus.Collector.
func (*storeMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (s *storeMetrics) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	f := s.f
	s.mu.Unlock()
	if f == nil {
		return
	}
	for name, r := range f.registries() {
		prometheus.WrapCollectorWith(prometheus.Labels{"cluster": string(name)}, r).Collect(ch)
	}
}

// registries returns the registries of the members that have one.
func (f *Fleet) registries() map[ClusterName]*fxstore.Registry {
	f.mu.Lock()
	members := slices.Collect(maps.Values(f.members))
	f.mu.Unlock()
	regs := make(map[ClusterName]*fxstore.Registry, len(members))
	for _, m := range members {
		if c := m.cluster(); c != nil {
			regs[m.name] = c.registry
		}
	}
	return regs
}

// registerMetrics adds the fleet's metrics to controller-runtime's
// registry, which the app serves at /metrics, while the app runs. A fleet
// without providers has no members, and no metrics.
func registerMetrics(lc fx.Lifecycle, f *Fleet) {
	if len(f.opts.Providers) == 0 {
		return
	}
	states := clusterMetrics{f}
	var registered, attached bool
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			err := metrics.Registry.Register(states)
			registered = err == nil
			if err == nil {
				err = registerMemberStores()
			}
			if err == nil {
				if attached = memberStores.attach(f); !attached {
					err = errors.New("another fleet's stores are collected")
				}
			}
			if err != nil {
				f.log.Warn("cluster metrics not registered; is another app running in this process?", zap.Error(err))
			}
			return nil
		},
		OnStop: func(context.Context) error {
			if registered {
				metrics.Registry.Unregister(states)
			}
			if attached {
				memberStores.detach(f)
			}
			return nil
		},
	})
}

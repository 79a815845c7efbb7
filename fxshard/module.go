package fxshard

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/contract"
	"github.com/fxkube/fxkube/internal/podnamespace"
	"github.com/fxkube/fxkube/lifecycle"
)

// Module provides the replica's *Shards, for the sharded stores and
// controllers of the app's modules (For, NewController), and runs its
// Coordinator under the app's lifecycle on every replica, leader or not:
// from when the app's stores have synced until it stops, when it gives its
// buckets back. An app without sharded stores takes no Lease. Its /readyz
// check "shards" fails until the replica is in its group (InGroup) and
// while the store of a bucket held has not synced; its metrics are
// fxkube_shard_*. It needs the Config (Options), connection's
// *Connection and fxstore's registry.
var Module = fx.Module("fxshard",
	fx.Provide(
		newShards,
		fx.Annotate(func(s *Shards) manager.Runnable { return s }, fx.ResultTags(`group:"`+contract.RunnablesGroup+`"`)),
		fx.Annotate(readiness, fx.ResultTags(`group:"`+contract.ChecksGroup+`"`)),
	),
	fx.Invoke(checkAtStart),
)

// checkAtStart fails the app's start, before any store lists, when it has
// sharded stores and no namespace for their Leases (describe and rbac need
// none), or a store of a cluster-scoped kind sharded by namespace, whose
// objects would all be in one bucket.
func checkAtStart(lc fx.Lifecycle, s *Shards, conn *connection.Connection) {
	lc.Append(fx.Hook{OnStart: func(context.Context) error {
		if !s.used() {
			return nil
		}
		errs := []error{s.namespaceErr}
		for _, st := range s.Info().Stores {
			if st.ShardKey != fxstore.ShardByNamespace {
				continue
			}
			mapping, err := conn.Mapper.RESTMapping(st.Key.Kind.GroupKind(), st.Key.Kind.Version)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("sharded store %s: %w", st.Key, err))
			case mapping.Scope.Name() == meta.RESTScopeNameRoot:
				errs = append(errs, fmt.Errorf("sharded store %s: %s is cluster-scoped, so every object's namespace is empty and all would be in one bucket; shard it by fxstore.ShardByUID", st.Key, mapping.Resource.GroupResource()))
			}
		}
		return errors.Join(errs...)
	}})
}

// Options is Module with cfg. Config.Namespace defaults to the pod's;
// Config.Logger to the app's.
func Options(cfg Config) fx.Option { return fx.Options(fx.Supply(cfg), Module) }

// params are what Module needs from the graph.
type params struct {
	fx.In

	Config     Config `optional:"true"`
	Registry   *fxstore.Registry
	Connection *connection.Connection
	Logger     *zap.Logger `optional:"true"`
}

// newShards returns the replica's Shards. A Config that does not make a
// Coordinator is an error only for an app that asks for a sharded store:
// For returns it. No namespace for the Leases (outside a cluster, without
// --shard-namespace) is one only when such an app starts.
func newShards(p params) *Shards {
	cfg := p.Config
	if cfg.Logger == nil && p.Logger != nil {
		cfg.Logger = p.Logger.Named("fxshard")
	}
	cfg, nsErr := DefaultNamespace(cfg, "sharding")
	kube, err := LeaseClient(p.Connection, cfg)
	if err != nil {
		return &Shards{registry: p.Registry, err: err}
	}
	s, err := NewShards(p.Registry, kube, cfg)
	if err != nil {
		return &Shards{registry: p.Registry, err: err}
	}
	s.namespaceErr = nsErr
	return s
}

// DefaultNamespace returns cfg with the namespace of its Leases
// defaulted to the pod's, for what purpose names in the error. Outside a
// cluster without one (--shard-namespace), it returns an error, and cfg
// with the namespace "unknown": a coordinator, which does nothing before
// it runs, needs a valid one until its start fails with the error.
func DefaultNamespace(cfg Config, purpose string) (Config, error) {
	ns, err := podnamespace.Default(cfg.Namespace, podnamespace.Path, purpose, "shard-namespace")
	if err != nil {
		ns = "unknown"
	}
	cfg.Namespace = ns
	return cfg, err
}

// LeaseClient returns a client of conn's cluster for the Leases of the
// group of cfg, sharing conn's HTTP client, with a rate limit that lets
// a replica renew them all every RetryPeriod.
func LeaseClient(conn *connection.Connection, cfg Config) (kubernetes.Interface, error) {
	return kubernetes.NewForConfigAndClient(leaseConfig(conn.Config, cfg), conn.HTTPClient)
}

// leaseConfig returns cfg with a rate limit that lets a replica renew all
// its Leases every RetryPeriod: up to every bucket and its member Lease at
// once, which client-go's default (5 requests a second, bursts of 10)
// would delay past the renew deadline.
func leaseConfig(cfg *rest.Config, c Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	// A config with errors makes no Coordinator; its figures do no harm.
	c, _ = c.withDefaults()
	buckets, retry := c.Buckets, c.RetryPeriod
	need := float32(2*(buckets+1)) / float32(retry.Seconds())
	if out.QPS >= 0 && out.QPS < need {
		out.QPS = need
	}
	if out.Burst < 2*(buckets+1) {
		out.Burst = 2 * (buckets + 1)
	}
	out.RateLimiter = nil
	return out
}

// Start implements manager.Runnable: the Coordinator takes part in the
// group until ctx ends, when an app has asked for a sharded store.
func (s *Shards) Start(ctx context.Context) error {
	if s.coordinator == nil || !s.used() {
		<-ctx.Done()
		return nil
	}
	collector := &shardMetrics{s}
	if err := metrics.Registry.Register(collector); err != nil {
		s.log.Warn("shard metrics not registered; is another app running in this process?", zap.Error(err))
	} else {
		defer metrics.Registry.Unregister(collector)
	}
	return s.Run(ctx)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica takes its share.
func (s *Shards) NeedLeaderElection() bool { return false }

func (s *Shards) used() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.stores) > 0
}

// readiness is the "shards" check: with sharded stores, the replica is in
// its group (it has tried once to take the free buckets of its share), and
// the stores of the buckets it holds have synced.
func readiness(s *Shards) lifecycle.Check {
	return lifecycle.Check{Name: "shards", Readiness: true, Checker: func(*http.Request) error {
		info := s.Info()
		if len(info.Stores) > 0 && !s.coordinator.inGroup.Load() {
			return fmt.Errorf("not in group %s yet: this replica has not taken its share of the buckets", info.Group)
		}
		var errs []error
		for _, st := range info.Stores {
			if !st.Synced {
				errs = append(errs, fmt.Errorf("%s sharded by %s: a bucket's store has not synced", st.Key, st.ShardKey))
			}
		}
		return errors.Join(errs...)
	}}
}

var (
	ownedDesc = prometheus.NewDesc("fxkube_shard_buckets_owned",
		"Buckets this replica holds.", []string{"group", "identity"}, nil)
	membersDesc = prometheus.NewDesc("fxkube_shard_members",
		"Live replicas of the group, as this replica sees them.", []string{"group", "identity"}, nil)
	handoversDesc = prometheus.NewDesc("fxkube_shard_handovers_total",
		"Buckets this replica acquired, released (to even out shares or on stop) and lost (renewals failed, or taken).", []string{"group", "identity", "handover"}, nil)
)

// shardMetrics collects the Coordinator's figures.
type shardMetrics struct{ s *Shards }

// Describe implements prometheus.Collector.
func (m *shardMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- ownedDesc
	ch <- membersDesc
	ch <- handoversDesc
}

// Collect implements prometheus.Collector.
func (m *shardMetrics) Collect(ch chan<- prometheus.Metric) {
	c := m.s.coordinator
	group, id := c.cfg.Namespace+"/"+c.cfg.Name, c.Identity()
	h := c.Handovers()
	ch <- prometheus.MustNewConstMetric(ownedDesc, prometheus.GaugeValue, float64(len(c.Owned())), group, id)
	ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(len(c.Members())), group, id)
	ch <- prometheus.MustNewConstMetric(handoversDesc, prometheus.CounterValue, float64(h.Acquired), group, id, "acquired")
	ch <- prometheus.MustNewConstMetric(handoversDesc, prometheus.CounterValue, float64(h.Released), group, id, "released")
	ch <- prometheus.MustNewConstMetric(handoversDesc, prometheus.CounterValue, float64(h.Lost), group, id, "lost")
}

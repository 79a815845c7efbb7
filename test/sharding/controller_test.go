package sharding_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// reconciles records every reconcile of every replica, to check that no
// two replicas ever reconcile one key at once.
type reconciles struct {
	mu      sync.Mutex
	running map[string]string // key → replica reconciling it
	overlap []string
	seen    map[string]map[string]bool // key → resourceVersions reconciled
	by      map[string]int             // replica → reconciles
}

func (r *reconciles) begin(replica, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if other, ok := r.running[key]; ok {
		r.overlap = append(r.overlap, fmt.Sprintf("%s by %s while %s", key, replica, other))
	}
	r.running[key] = replica
	r.by[replica]++
}

func (r *reconciles) end(key, version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, key)
	if r.seen[key] == nil {
		r.seen[key] = map[string]bool{}
	}
	r.seen[key][version] = true
}

func (r *reconciles) reconciled(key, version string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[key][version]
}

// shardReplica is one replica of a sharded app, in this process: its own
// registry, connection, coordinator and controller.
type shardReplica struct {
	name   string
	reg    *fxstore.Registry
	shards *fxshard.Shards
	store  *fxshard.Store[*corev1.ConfigMap]
	cancel context.CancelFunc
	done   chan struct{}
}

func startShardReplica(t *testing.T, cfg *rest.Config, ns, name string, rec *reconciles) *shardReplica {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1 // the coordinator renews up to 17 Leases at once
	scheme := k8sruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(name)
	reg := fxstore.NewRegistry(scheme, fxstore.WithLogger(log))
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	shards, err := fxshard.NewShards(reg, kube, fxshard.Config{
		Namespace: ns, Name: "widgets", Identity: name,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond,
		Logger: log,
	})
	require.NoError(t, err)
	store, err := fxshard.For[*corev1.ConfigMap](shards, fxstore.Spec{Namespace: ns, LabelSelector: "app=sharded"}, fxstore.ShardByUID)
	require.NoError(t, err)
	ctrl, err := fxcontroller.New("sharded", store, reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		cm, err := store.Get(req.Namespace, req.Name)
		if err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		key := req.String()
		rec.begin(name, key)
		time.Sleep(2 * time.Millisecond) // long enough for an overlap to show
		rec.end(key, cm.ResourceVersion)
		return reconcile.Result{}, nil
	}))
	require.NoError(t, err)
	conn, err := connection.New(cfg, scheme)
	require.NoError(t, err)
	t.Cleanup(conn.HTTPClient.CloseIdleConnections)

	ctx, cancel := context.WithCancel(context.Background())
	r := &shardReplica{name: name, reg: reg, shards: shards, store: store, cancel: cancel, done: make(chan struct{})}
	require.NoError(t, reg.Start(ctx, apiserver.NewSource(conn.Client)))
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(t, shards.Run(ctx)) })
	wg.Go(func() { assert.NoError(t, ctrl.Start(ctx)) })
	go func() {
		wg.Wait()
		reg.Stop()
		close(r.done)
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *shardReplica) stop() {
	r.cancel()
	<-r.done
}

// Three replicas share a sharded controller's 300 objects: each holds
// and reconciles only the buckets it owns, every change is reconciled,
// never by two replicas at once, and when one stops its buckets move to
// the others without a change lost.
func TestShardedController(t *testing.T) {
	checkShardedController(t, testenv.Config(t), true)
}

// The same where the API server ignores shard selectors: each bucket's
// store is a view of the replica's one store of every object, and the
// objects of a bucket taken reach the controller at once.
func TestShardedControllerWithoutTheGate(t *testing.T) {
	checkShardedController(t, withoutTheGate(t).Config, false)
}

func checkShardedController(t *testing.T, cfg *rest.Config, serverFilters bool) {
	ctx := t.Context()
	scheme := k8sruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sharded-"}}
	require.NoError(t, direct.Create(ctx, nsObj))
	ns := nsObj.Name
	const n = 300
	for i := range n {
		require.NoError(t, direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("cm-%03d", i), Labels: map[string]string{"app": "sharded"},
		}}))
	}
	rec := &reconciles{running: map[string]string{}, seen: map[string]map[string]bool{}, by: map[string]int{}}
	replicas := []*shardReplica{
		startShardReplica(t, cfg, ns, "r0", rec), startShardReplica(t, cfg, ns, "r1", rec), startShardReplica(t, cfg, ns, "r2", rec),
	}

	// allReconciled waits until every object's current version has been
	// reconciled.
	allReconciled := func(msg string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var list corev1.ConfigMapList
			if !assert.NoError(c, direct.List(ctx, &list, client.InNamespace(ns))) {
				return
			}
			missing := 0
			for _, cm := range list.Items {
				if !rec.reconciled(ns+"/"+cm.Name, cm.ResourceVersion) {
					missing++
				}
			}
			assert.Zero(c, missing, "objects whose last change is not reconciled")
		}, 30*time.Second, 100*time.Millisecond, msg)
	}
	// balanced waits until the replicas' shares add up to every bucket,
	// each held once, and each store holds exactly its buckets' objects.
	balanced := func(running []*shardReplica, shares []int) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var owned []int
			counts := make([]int, len(running))
			total := 0
			for i, r := range running {
				buckets := r.shards.Coordinator().Owned()
				counts[i] = len(buckets)
				owned = append(owned, buckets...)
				held := r.store.Buckets()
				assert.ElementsMatch(c, buckets, held, "%s: the store holds its buckets' objects", r.name)
				if !r.store.HasSynced() {
					c.Errorf("%s: not synced", r.name)
					continue
				}
				count, err := r.store.Count()
				assert.NoError(c, err)
				total += count
			}
			slices.Sort(owned)
			slices.Sort(counts)
			assert.Equal(c, shares, counts)
			assert.Len(c, slices.Compact(owned), 16, "every bucket held once")
			assert.Equal(c, n, total, "the replicas' stores hold every object once")
		}, 30*time.Second, 100*time.Millisecond)
	}
	balanced(replicas, []int{5, 5, 6})
	allReconciled("initial objects")
	for _, r := range replicas {
		for _, info := range r.reg.Stores() {
			if info.Key.Shard != "" {
				assert.Equal(t, !serverFilters, info.ViewOf != nil, "%s: %s is a view of the store of every object when, and only when, the API server ignores shard selectors", r.name, info.Key)
			}
		}
	}

	update := func(round int) {
		t.Helper()
		for i := range n {
			cm := &corev1.ConfigMap{}
			require.NoError(t, direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("cm-%03d", i)}, cm))
			cm.Data = map[string]string{"round": fmt.Sprint(round)}
			require.NoError(t, direct.Update(ctx, cm))
		}
	}
	update(1)
	allReconciled("after an update of every object")

	// One replica stops while every object changes: its buckets move to
	// the other two, with the changes made while they moved.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		replicas[2].stop()
	}()
	update(2)
	<-stopped
	balanced(replicas[:2], []int{8, 8})
	allReconciled("after a replica stopped")

	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Empty(t, rec.overlap, "no two replicas reconciled one key at once")
	t.Logf("reconciles by replica: %v", rec.by)
	for _, r := range replicas {
		assert.Positive(t, rec.by[r.name], "%s reconciled its share", r.name)
	}
}

// A cluster-scoped kind sharded by namespace, whose objects would all be in
// one bucket, fails the app's start before any store lists, naming the
// store and the fix.
func TestClusterScopedShardedByNamespace(t *testing.T) {
	app := fx.New(
		fx.Supply(testenv.Config(t), zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))),
		fxstore.Module,
		fxcontroller.Module,
		fxshard.Options(fxshard.Config{Namespace: "default", Name: "bad"}),
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0"}),
		fx.Invoke(func(s *fxshard.Shards) error {
			_, err := fxshard.For[*corev1.Namespace](s, fxstore.Spec{}, fxstore.ShardByNamespace)
			return err
		}),
	)
	require.NoError(t, app.Err())
	err := app.Start(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `sharded store Namespace/v1 (all namespaces): namespaces is cluster-scoped, so every object's namespace is empty and all would be in one bucket; shard it by fxstore.ShardByUID`)
	require.NoError(t, app.Stop(t.Context()))
}

// Outside a cluster, fxshard with no Leases' namespace fails the app's
// start, before any store lists, saying what to set. (The app's run
// command picks the kubeconfig context's namespace instead: see
// TestRunOutsideAClusterTakesTheKubeconfigNamespace in test/.)
func TestShardNamespaceRequired(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	app := fx.New(
		fx.Supply(testenv.Config(t), zap.New(core)),
		fxstore.Module,
		fxcontroller.Module,
		fxshard.Options(fxshard.Config{Name: "no-namespace"}),
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0"}),
		fx.Invoke(func(s *fxshard.Shards) error {
			_, err := fxshard.For[*corev1.ConfigMap](s, fxstore.Spec{}, fxstore.ShardByUID)
			return err
		}),
	)
	require.NoError(t, app.Err())
	err := app.Start(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sharding needs the Leases' namespace, and the app runs outside a cluster (no pod namespace to default to): set --shard-namespace")
	assert.Zero(t, logs.FilterMessage("store synced").Len(), "it failed before any store listed")
	require.NoError(t, app.Stop(t.Context()))
}

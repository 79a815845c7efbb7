package reliability

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/internal/controlplane"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// The faults the other tests inject do what they say: a stopped API server
// refuses connections; one started again serves the old clients, and what a
// replica wrote meanwhile; after compaction, a watch from an old resource
// version on a server without a watch cache is "too old".
func TestFaultInjection(t *testing.T) {
	ctx := t.Context()
	cp := testenv.ControlPlane(t)
	kube, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	replica, err := cp.StartReplica("watch-cache=false")
	require.NoError(t, err)
	defer func() { assert.NoError(t, replica.Close()) }()
	viaReplica, err := kubernetes.NewForConfig(replica.Config)
	require.NoError(t, err)

	cms := kube.CoreV1().ConfigMaps("default")
	before, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "faults-before"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	startAPIServer := stopAPIServer(t, cp)
	_, err = cms.Get(ctx, "faults-before", metav1.GetOptions{})
	require.Error(t, err, "the API server is down")
	t.Log(err)
	_, err = viaReplica.CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "faults-during"}}, metav1.CreateOptions{})
	require.NoError(t, err, "the replica serves")
	rev, err := cp.CompactEtcd(ctx)
	require.NoError(t, err)
	t.Logf("compacted etcd at revision %d", rev)
	begin := time.Now()
	require.NoError(t, startAPIServer())
	t.Logf("the API server started again in %s", time.Since(begin))

	_, err = cms.Get(ctx, "faults-during", metav1.GetOptions{})
	require.NoError(t, err, "the old client reaches the restarted API server, which serves what the replica wrote")

	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The API server reports the expiry as the watch's first event.
	w, err := viaReplica.CoreV1().ConfigMaps("default").Watch(wctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err == nil {
		ev, ok := <-w.ResultChan()
		w.Stop()
		require.True(t, ok, "the watch ended without an event")
		require.Equal(t, watch.Error, ev.Type, "a watch from before the compaction started: %v", ev.Object)
		err = apierrors.FromObject(ev.Object)
	}
	assert.True(t, apierrors.IsResourceExpired(err) || apierrors.IsGone(err), "want 410 Gone, got %v", err)
	t.Log(err)
}

// TestAPIServerRestart restarts the API server under the running app, with
// rollout and mirror, and changes the world before, during and after the
// outage: the stores reconnect and resync, the controllers resume, and the
// cluster converges to what the last writes call for, object by object.
// While the API server is away longer than the store failure timeout,
// every store fails and /readyz says so; once it is back, both pass again
// without a restart of the app.
//
// During the outage the writes go through a second API server on the same
// etcd (a replica, as in an HA control plane), so they are certainly made
// while the app cannot watch; right after the restart more writes race the
// app's reconnecting watches.
func TestAPIServerRestart(t *testing.T) {
	const outage = 5 * time.Second
	ctx := t.Context()
	cp := testenv.ControlPlane(t)
	admin := newClient(t, testenv.Config(t))
	replica, err := cp.StartReplica()
	require.NoError(t, err)
	defer func() { assert.NoError(t, replica.Close()) }()
	viaReplica := newClient(t, replica.Config)

	w := newWorld("restart", 3, layout{Configs: 4, Deployments: 8, Sources: 4})
	require.NoError(t, w.create(ctx, admin, 8))
	log, logs := newLogger(t, zap.WarnLevel)
	probes := testenv.LoopbackAddr(t)
	const failureTimeout = 2 * time.Second
	a := newExampleApp(t, testenv.Config(t), lifecycle.Config{HealthProbeBindAddress: probes, StoreFailureTimeout: failureTimeout}, log)
	a.RequireStart()
	defer a.RequireStop()
	require.Zero(t, w.converge(t, admin, a, time.Minute), "before the outage")
	stores := map[string]interface{ Err() error }{
		"ConfigMaps": a.ConfigMaps, "Secrets": a.Secrets, "Deployments": a.Deployments, "Namespaces": a.Namespaces,
	}
	received := receivedByStore(t, a)

	// Before: changes the app may or may not have handled when the API
	// server goes.
	require.NoError(t, w.changeSome(ctx, admin, 10))
	startAPIServer := stopAPIServer(t, cp)
	stopped := time.Now()

	// During.
	require.NoError(t, w.changeSome(ctx, viaReplica, 20))
	cl, err := w.read(ctx, viaReplica)
	require.NoError(t, err)
	require.NotEmpty(t, w.checkStores(a, cl), "the app cannot have seen the changes made during the outage")
	// Long enough for the app's reflectors and reconciles to fail and back
	// off, and for /readyz to fail.
	time.Sleep(time.Until(stopped.Add(outage)))
	require.Eventually(t, func() bool { return statusOf(t, probes, "/readyz") == http.StatusInternalServerError },
		30*time.Second, 100*time.Millisecond, "/readyz fails once the stores have failed for longer than the bound")
	t.Logf("/readyz failed %s after the API server stopped", time.Since(stopped))
	for name, s := range stores {
		assert.ErrorContains(t, s.Err(), "failing since", "the %s store fails", name)
	}

	require.NoError(t, startAPIServer())
	restarted := time.Now()
	t.Logf("API server down for %s", restarted.Sub(stopped))

	// Right after, and after.
	require.NoError(t, w.changeSome(ctx, admin, 20))
	require.Zero(t, w.converge(t, admin, a, 2*time.Minute), "after the restart")
	t.Logf("converged %s after the API server came back", time.Since(restarted))
	require.Eventually(t, func() bool { return statusOf(t, probes, "/readyz") == http.StatusOK },
		time.Minute, 100*time.Millisecond, "/readyz passes again")
	for name, s := range stores {
		assert.NoError(t, s.Err(), "the %s store works again", name)
	}
	require.NoError(t, w.changeSome(ctx, admin, 20))
	require.Zero(t, w.converge(t, admin, a, time.Minute), "after the outage")

	after := receivedByStore(t, a)
	for store, n := range after {
		t.Logf("store %s received %v objects across the outage", store, n-received[store])
	}
	t.Logf("%d writes; %d warnings logged", w.writes.Load(), logs.FilterLevelExact(zap.WarnLevel).Len())
}

// stopAPIServer stops the API server and returns the function that starts it
// again. Should the test end first, it starts it when the test is cleaned
// up, for the tests after it.
func stopAPIServer(t *testing.T, cp *controlplane.Running) (start func() error) {
	t.Helper()
	require.NoError(t, cp.StopAPIServer())
	start = sync.OnceValue(cp.StartAPIServer)
	t.Cleanup(func() { _ = start() })
	return start
}

// receivedByStore reads fxkube_store_received_total of each of the app's
// stores through the registry's Prometheus collector.
func receivedByStore(t *testing.T, a *exampleApp) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(a.Registry))
	out := make(map[string]float64)
	for _, m := range gatherFrom(t, reg)["fxkube_store_received_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "store" {
				out[l.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// TestWatchExpiry cuts the app off from the API server, changes the world,
// compacts etcd and lets the app's watches resume, from resource versions
// etcd no longer has: "too old resource version". The stores list again and
// miss no change.
//
// The app talks to a replica API server without a watch cache, which serves
// every watch from etcd, through a switchboard that ends its watches cleanly
// and refuses its requests while it is cut off. Without compaction, the same
// cut resumes the watches where they were, without a list: the difference
// shows that it is the expiry that makes the stores list.
func TestWatchExpiry(t *testing.T) {
	ctx := t.Context()
	cp := testenv.ControlPlane(t)
	admin := newClient(t, testenv.Config(t))
	replica, err := cp.StartReplica("watch-cache=false")
	require.NoError(t, err)
	defer func() { assert.NoError(t, replica.Close()) }()

	// Few changes to many objects, so that what a resumed watch delivers
	// is well short of a list.
	const changes = 6
	w := newWorld("expiry", 3, layout{Configs: 6, Deployments: 12, Sources: 6})
	require.NoError(t, w.create(ctx, admin, 8))
	log, _ := newLogger(t, zap.WarnLevel)
	cfg := rest.CopyConfig(replica.Config)
	var board *switchboard
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		board = newSwitchboard(rt)
		return board
	}
	a := newExampleApp(t, cfg, lifecycle.Config{}, log)
	a.RequireStart()
	defer a.RequireStop()
	require.Zero(t, w.converge(t, admin, a, time.Minute), "before the cut")

	watched := []string{"/api/v1/configmaps", "/api/v1/secrets", "/apis/apps/v1/deployments", "/api/v1/namespaces"}
	cut := func(compact bool) (received map[string]float64) {
		t.Helper()
		// client-go lists again after a watch cut within a second of its
		// start; let every watch settle first.
		require.Eventually(t, func() bool { return board.watching(2*time.Second, watched...) },
			time.Minute, 100*time.Millisecond, "the app watches its four stores")
		before := receivedByStore(t, a)
		board.Cut()
		require.NoError(t, w.changeSome(ctx, admin, changes))
		if compact {
			rev, err := cp.CompactEtcd(ctx)
			require.NoError(t, err)
			t.Logf("compacted etcd at revision %d", rev)
		}
		// Long enough for every reflector to have tried, and failed, to
		// watch again.
		time.Sleep(2 * time.Second)
		board.Restore()
		// Every store watches again: it has resumed, or listed first.
		require.Eventually(t, func() bool { return board.watching(0, watched...) },
			time.Minute, 100*time.Millisecond, "the app watches its four stores again")
		require.Zero(t, w.converge(t, admin, a, 2*time.Minute), "after the cut (compacted: %v)", compact)
		after := receivedByStore(t, a)
		received = make(map[string]float64)
		for store, n := range after {
			received[store] = n - before[store]
		}
		return received
	}

	resumed := cut(false)
	expired := cut(true)
	for _, info := range a.Registry.Stores() {
		store := info.Key.String()
		n := countStore(t, a, store)
		t.Logf("store %s (%d objects) received %v objects after a resumed watch, %v after an expired one",
			store, n, resumed[store], expired[store])
		assert.Less(t, resumed[store], float64(n), "%s: a resumed watch receives the changes, not a list", store)
		assert.GreaterOrEqual(t, expired[store], float64(n), "%s: an expired watch makes the store list again", store)
	}
}

// countStore returns how many objects the app's store named store holds.
func countStore(t *testing.T, a *exampleApp, store string) int {
	t.Helper()
	for _, s := range []interface {
		String() string
		Count() (int, error)
	}{a.ConfigMaps, a.Secrets, a.Deployments, a.Namespaces} {
		if s.String() == store {
			n, err := s.Count()
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no store %s", store)
	return 0
}

package lifecycle_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// withConfigMaps asks for a store of every ConfigMap.
func withConfigMaps() fx.Option {
	return fx.Invoke(func(r *fxstore.Registry) error {
		_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
		return err
	})
}

// events records, in order, what runnables did.
type events = testenv.Records[string]

// fakeCache is a cache an operator made and added as a runnable: Start
// runs it, and it syncs once started and sync is closed. The embedded
// Cache is nil: nothing else is called.
type fakeCache struct {
	crcache.Cache
	events   *events
	started  chan struct{}
	sync     chan struct{}
	startErr error
}

func newFakeCache(e *events) *fakeCache {
	return &fakeCache{events: e, started: make(chan struct{}), sync: make(chan struct{})}
}

func (c *fakeCache) Start(ctx context.Context) error {
	c.events.Add("cache started")
	close(c.started)
	if c.startErr != nil {
		return c.startErr
	}
	<-ctx.Done()
	c.events.Add("cache stopped")
	return nil
}

func (c *fakeCache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-c.started:
	case <-ctx.Done():
		return false
	}
	select {
	case <-c.sync:
		return true
	case <-ctx.Done():
		return false
	}
}

func requireClosed(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal(msg)
	}
}

// cluster has a cache, as a cluster.Cluster does.
type cluster struct{ *fakeCache }

func (c cluster) GetCache() crcache.Cache { return c.fakeCache }

// waitingController is a controller whose warm-up waits until its
// source's cache has started, as a source.Kind over a cache of the
// operator's own does.
type waitingController struct {
	events *events
	cache  *fakeCache
}

func (c waitingController) Warmup(ctx context.Context) error {
	select {
	case <-c.cache.started:
		c.events.Add("warmed up")
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c waitingController) Start(ctx context.Context) error {
	c.events.Add("controller started")
	<-ctx.Done()
	c.events.Add("controller stopped")
	return nil
}

// nonLeader is a runnable that needs no leader.
type nonLeader struct{ events *events }

func (r nonLeader) NeedLeaderElection() bool { return false }

func (r nonLeader) Start(ctx context.Context) error {
	r.events.Add("runnable started")
	<-ctx.Done()
	r.events.Add("runnable stopped")
	return nil
}

// Runnables start in controller-runtime's groups: a server that needs no
// leader serves before any store lists; a cache (or anything with
// GetCache) starts before the warm-ups that may wait for it, and the
// start waits for its sync; controllers start after, with the runnables
// that need no leader (controller-runtime starts those before the
// warm-ups). Caches stop once the controllers have.
func TestRunnablesStartInControllerRuntimesGroups(t *testing.T) {
	e := &events{}
	own, clusterCache := newFakeCache(e), newFakeCache(e)
	ln, err := net.Listen("tcp", testenv.LoopbackAddr(t))
	require.NoError(t, err)
	server := &manager.Server{
		Name:     "operator's own",
		Server:   &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), ReadHeaderTimeout: time.Second},
		Listener: ln,
	}
	ta := newTestApp(t, lifecycle.Config{},
		withConfigMaps(),
		lifecycle.Runnables(waitingController{events: e, cache: own}, own, cluster{clusterCache}, server, nonLeader{e}),
	)
	release := ta.src.HoldLists()
	started := make(chan error, 1)
	go func() { started <- ta.app.Start(t.Context()) }()

	require.Eventually(t, func() bool { return probe(t, ln.Addr().String(), "/") == http.StatusOK }, 10*time.Second, 10*time.Millisecond,
		"the server serves while the stores' lists are held")
	requireClosed(t, own.started, "the operator's cache started before the stores synced")
	requireClosed(t, clusterCache.started, "the cluster's cache started before the stores synced")
	close(own.sync)
	release()
	select {
	case err := <-started:
		t.Fatalf("the start ended before the cluster's cache synced: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(clusterCache.sync)
	select {
	case err := <-started:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the start went on 10 s after every store and cache had synced")
	}
	require.Eventually(t, func() bool { return len(e.All()) == 5 }, 10*time.Second, 10*time.Millisecond, "the runnables start")
	ta.app.RequireStop()

	got := e.All()
	require.Len(t, got, 9, "%q", got)
	assert.ElementsMatch(t, []string{"cache started", "cache started", "warmed up"}, got[:3], "caches start, and the warm-up waits for one")
	assert.ElementsMatch(t, []string{"controller started", "runnable started"}, got[3:5], "the runnables start after the barrier")
	assert.ElementsMatch(t, []string{"controller stopped", "runnable stopped"}, got[5:7], "and stop first")
	assert.Equal(t, []string{"cache stopped", "cache stopped"}, got[7:], "the caches stop after the runnables")
}

// A cache that does not sync holds the start back until the sync timeout,
// and the error names it, saying that every store synced.
func TestCacheThatDoesNotSyncFailsTheStart(t *testing.T) {
	e := &events{}
	ta := newTestApp(t, lifecycle.Config{SyncTimeout: 300 * time.Millisecond},
		withConfigMaps(),
		lifecycle.Runnables(newFakeCache(e)),
	)
	err := ta.app.Start(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the start did not finish within the sync timeout of 300ms (raise it with --sync-timeout)")
	assert.Contains(t, err.Error(), "all 1 stores synced; still waiting for 1 more")
	assert.Contains(t, err.Error(), "cache *lifecycle_test.fakeCache: syncing: not done")
	assert.Equal(t, []string{"cache started", "cache stopped"}, e.All(), "the failed start stopped the cache")
}

// A cache that fails to start fails the app's start at once, naming it.
func TestCacheThatFailsFailsTheStart(t *testing.T) {
	c := newFakeCache(&events{})
	c.startErr = errors.New("no such kind")
	ta := newTestApp(t, lifecycle.Config{SyncTimeout: time.Minute}, lifecycle.Runnables(c))
	begin := time.Now()
	err := ta.app.Start(t.Context())
	require.Error(t, err)
	assert.Less(t, time.Since(begin), 30*time.Second, "well before the sync timeout")
	assert.Contains(t, err.Error(), "run cache *lifecycle_test.fakeCache: no such kind")
}

// A warm-up that does not finish is named once the sync timeout has
// passed, with what it reported if it reported in time.
func TestWarmupThatDoesNotFinishFailsTheStart(t *testing.T) {
	e := &events{}
	never := newFakeCache(e) // not a runnable: never started
	ta := newTestApp(t, lifecycle.Config{SyncTimeout: 300 * time.Millisecond},
		lifecycle.Runnables(waitingController{events: e, cache: never}),
	)
	err := ta.app.Start(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the start did not finish within the sync timeout of 300ms")
	assert.Contains(t, err.Error(), "lifecycle_test.waitingController: warming up: not done")
	assert.Empty(t, e.All(), "nothing started")
}

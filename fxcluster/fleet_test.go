package fxcluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/internal/workload"
)

// fleetEnv is a fleet whose members are in-memory sources, one per host.
type fleetEnv struct {
	t       *testing.T
	fleet   *fxcluster.Fleet
	sources map[string]*fxstoretest.Source // by host
	aware   chan fxcluster.Aware
}

func newFleetEnv(t *testing.T, sources map[string]*fxstoretest.Source, waitFor ...fxcluster.ClusterName) *fleetEnv {
	env := &fleetEnv{t: t, sources: sources, aware: make(chan fxcluster.Aware, 1)}
	provider := fxcluster.ProviderFunc(func(ctx context.Context, clusters fxcluster.Aware) error {
		env.aware <- clusters
		<-ctx.Done()
		return nil
	})
	env.fleet = fxcluster.NewFleet(clientgoscheme.Scheme, zaptest.NewLogger(t), fxcluster.Options{
		SyncTimeout: 2 * time.Second,
		StopTimeout: time.Second,
		Backoff:     wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1 << 30},
		Providers:   []fxcluster.Provider{provider},
		WaitFor:     waitFor,
		NewSource:   func(c *connection.Connection) fxstore.Source { return sources[c.Config.Host] },
	})
	return env
}

// run starts the fleet and the runnables, and stops them when the test
// ends. It returns what engages members.
func (env *fleetEnv) run(runnables ...interface{ Start(context.Context) error }) fxcluster.Aware {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, rn := range append(runnables, env.fleet) {
		wg.Go(func() { assert.NoError(env.t, rn.Start(ctx)) })
	}
	env.t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return <-env.aware
}

func (env *fleetEnv) state(name fxcluster.ClusterName) (fxcluster.ClusterInfo, bool) {
	for _, info := range env.fleet.Clusters() {
		if info.Name == name {
			return info, true
		}
	}
	return fxcluster.ClusterInfo{}, false
}

func (env *fleetEnv) requireState(name fxcluster.ClusterName, want fxcluster.State) fxcluster.ClusterInfo {
	env.t.Helper()
	var info fxcluster.ClusterInfo
	require.Eventually(env.t, func() bool {
		info, _ = env.state(name)
		return info.State == want
	}, 10*time.Second, 5*time.Millisecond, "cluster %q %s", name, want)
	return info
}

func configFor(host string) *rest.Config { return &rest.Config{Host: host} }

// twoMembers are the sources of members a and b, each holding one
// ConfigMap in namespace web: in-a and in-b.
func twoMembers() map[string]*fxstoretest.Source {
	return map[string]*fxstoretest.Source{
		"https://a": fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("web", "in-a")),
		"https://b": fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("web", "in-b")),
	}
}

// A member whose source fails fails alone, with its cause, and joins once
// the source works. Reconciles reach the working member meanwhile.
func TestMemberFailsAloneAndJoinsOnceItCan(t *testing.T) {
	sources := twoMembers()
	restore := sources["https://b"].Fail(errors.New("b is away"))
	env := newFleetEnv(t, sources)
	configMaps, err := fxcluster.For[*corev1.ConfigMap](env.fleet, fxstore.Spec{})
	require.NoError(t, err)
	var seen testenv.Records[fxcluster.Request]
	ctrl, err := fxcluster.NewController("record", configMaps, fxcluster.Func(func(_ context.Context, req fxcluster.Request) (reconcile.Result, error) {
		store, err := configMaps.In(req.ClusterName)
		if err != nil {
			return reconcile.Result{}, err
		}
		if _, err := store.Get(req.Namespace, req.Name); err != nil {
			return reconcile.Result{}, err
		}
		seen.Add(req)
		return reconcile.Result{}, nil
	}))
	require.NoError(t, err)
	aware := env.run(ctrl)
	require.NoError(t, aware.Engage(t.Context(), "a", configFor("https://a")))
	require.NoError(t, aware.Engage(t.Context(), "b", configFor("https://b")))

	env.requireState("a", fxcluster.Ready)
	failed := env.requireState("b", fxcluster.Failed)
	require.ErrorContains(t, failed.Err, "b is away")
	require.ErrorContains(t, failed.Err, `cluster "b"`)
	inA := fxcluster.Request{Request: reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "web", Name: "in-a"}}, ClusterName: "a"}
	require.Eventually(t, func() bool { return len(seen.All()) == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []fxcluster.Request{inA}, seen.All())
	_, err = env.fleet.GetCluster(t.Context(), "b")
	require.ErrorIs(t, err, fxcluster.ErrClusterNotFound)

	restore()
	env.requireState("b", fxcluster.Ready)
	inB := fxcluster.Request{Request: reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "web", Name: "in-b"}}, ClusterName: "b"}
	require.Eventually(t, func() bool { return len(seen.All()) == 2 }, 10*time.Second, 5*time.Millisecond)
	assert.ElementsMatch(t, []fxcluster.Request{inA, inB}, seen.All())
	info, _ := env.state("b")
	assert.Greater(t, info.Attempts, 1)
	assert.Equal(t, "cluster://b/web/in-b", inB.String())
}

// A member that joined and whose source then fails is Failing, naming
// its store and the cause, while the other member goes on. Once the
// source works again, it is Ready: it never left, nor joined again.
func TestJoinedMemberFailingIsNamedAndRecovers(t *testing.T) {
	sources := twoMembers()
	env := newFleetEnv(t, sources)
	configMaps, err := fxcluster.For[*corev1.ConfigMap](env.fleet, fxstore.Spec{})
	require.NoError(t, err)
	var seen testenv.Records[fxcluster.Request]
	ctrl, err := fxcluster.NewController("record", configMaps, fxcluster.Func(func(_ context.Context, req fxcluster.Request) (reconcile.Result, error) {
		seen.Add(req)
		return reconcile.Result{}, nil
	}))
	require.NoError(t, err)
	aware := env.run(ctrl)
	require.NoError(t, aware.Engage(t.Context(), "a", configFor("https://a")))
	require.NoError(t, aware.Engage(t.Context(), "b", configFor("https://b")))
	env.requireState("a", fxcluster.Ready)
	env.requireState("b", fxcluster.Ready)
	require.Eventually(t, func() bool { return len(seen.All()) == 2 }, 10*time.Second, 5*time.Millisecond)

	restore := sources["https://b"].Fail(errors.New("b is away"))
	failing := env.requireState("b", fxcluster.Failing)
	require.ErrorContains(t, failing.Err, "b is away")
	require.ErrorContains(t, failing.Err, `store ConfigMap/v1 (cluster "b", all namespaces)`, "it names the store")
	assert.Equal(t, 1, failing.Attempts, "it has not left")
	a, ok := env.state("a")
	require.True(t, ok)
	assert.Equal(t, fxcluster.Ready, a.State, "a failing member gates only itself")
	require.NoError(t, sources["https://a"].Client().Create(t.Context(), testenv.ConfigMap("web", "later")))
	later := fxcluster.Request{Request: reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "web", Name: "later"}}, ClusterName: "a"}
	require.Eventually(t, func() bool { return slices.Contains(seen.All(), later) }, 10*time.Second, 5*time.Millisecond, "a goes on")

	// Made while b's stores cannot list it: they get it as they recover.
	require.NoError(t, sources["https://b"].Client().Create(t.Context(), testenv.ConfigMap("web", "meanwhile")))
	restore()
	recovered := env.requireState("b", fxcluster.Ready)
	assert.NoError(t, recovered.Err)
	assert.Equal(t, 1, recovered.Attempts, "it recovered in place")
	meanwhile := fxcluster.Request{Request: reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "web", Name: "meanwhile"}}, ClusterName: "b"}
	require.Eventually(t, func() bool { return slices.Contains(seen.All(), meanwhile) }, 10*time.Second, 5*time.Millisecond, "b reconciles again")
}

// The stores of one kind in several members share what their objects
// repeat: the same Pod in two members keeps one copy of its parts. A
// member that leaves takes its share away; the other's objects stay as
// they were.
func TestMembersShareWhatTheirObjectsRepeat(t *testing.T) {
	deployment := workload.Deployment("shop", 1, 2)
	sources := map[string]*fxstoretest.Source{
		"https://a": fxstoretest.NewSource(clientgoscheme.Scheme, workload.Pod(deployment, 0)),
		"https://b": fxstoretest.NewSource(clientgoscheme.Scheme, workload.Pod(deployment, 0)),
	}
	env := newFleetEnv(t, sources)
	pods, err := fxcluster.For[*corev1.Pod](env.fleet, fxstore.Spec{})
	require.NoError(t, err)
	aware := env.run()
	require.NoError(t, aware.Engage(t.Context(), "a", configFor("https://a")))
	bCtx, leaveB := context.WithCancel(t.Context())
	require.NoError(t, aware.Engage(bCtx, "b", configFor("https://b")))
	env.requireState("a", fxcluster.Ready)
	env.requireState("b", fxcluster.Ready)
	pod := func(member fxcluster.ClusterName) *corev1.Pod {
		store, err := pods.In(member)
		require.NoError(t, err)
		list, err := store.List()
		require.NoError(t, err)
		require.Len(t, list, 1)
		return list[0]
	}
	inA, inB := pod("a"), pod("b")
	require.NotSame(t, inA, inB)
	assert.Same(t, unsafe.SliceData(inA.Spec.Containers), unsafe.SliceData(inB.Spec.Containers), "one copy across members")
	assert.Same(t, unsafe.SliceData(inA.Spec.Volumes), unsafe.SliceData(inB.Spec.Volumes))

	bytesOfA := func() int64 {
		info, _ := env.state("a")
		require.Len(t, info.Stores, 1)
		return info.Stores[0].Bytes
	}
	shared := bytesOfA()
	want := inA.DeepCopy()
	leaveB()
	require.Eventually(t, func() bool { _, ok := env.state("b"); return !ok }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, want, pod("a"), "a's objects are as they were")
	assert.Greater(t, bytesOfA(), shared, "a's store counts the parts it shared with b as its own now")
}

// A store asked for in named members is in those only, and a controller
// runs where its primary store is and InClusters selects.
func TestStoresAndControllersInChosenMembers(t *testing.T) {
	sources := map[string]*fxstoretest.Source{}
	for _, host := range []string{"https://a", "https://b", "https://c"} {
		sources[host] = fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("web", "x"))
	}
	env := newFleetEnv(t, sources)
	configMaps, err := fxcluster.ForClusters[*corev1.ConfigMap](env.fleet, []fxcluster.ClusterName{"a", "b"}, fxstore.Spec{})
	require.NoError(t, err)
	var seen testenv.Records[fxcluster.ClusterName]
	ctrl, err := fxcluster.NewController("chosen", configMaps, fxcluster.Func(func(_ context.Context, req fxcluster.Request) (reconcile.Result, error) {
		seen.Add(req.ClusterName)
		return reconcile.Result{}, nil
	}), fxcluster.InClusters(func(name fxcluster.ClusterName) bool { return name != "b" }))
	require.NoError(t, err)
	aware := env.run(ctrl)
	for _, name := range []fxcluster.ClusterName{"a", "b", "c"} {
		require.NoError(t, aware.Engage(t.Context(), name, configFor("https://"+string(name))))
		env.requireState(name, fxcluster.Ready)
	}
	for name, want := range map[fxcluster.ClusterName]int{"a": 1, "b": 1, "c": 0} {
		info, _ := env.state(name)
		assert.Len(t, info.Stores, want, "stores in %s", name)
	}
	_, err = configMaps.In("c")
	require.ErrorIs(t, err, fxcluster.ErrClusterNotFound)
	require.Eventually(t, func() bool { return len(seen.All()) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, sources["https://b"].Client().Create(t.Context(), testenv.ConfigMap("web", "y")))
	require.NoError(t, sources["https://a"].Client().Create(t.Context(), testenv.ConfigMap("web", "y")))
	require.Eventually(t, func() bool { return len(seen.All()) == 2 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []fxcluster.ClusterName{"a", "a"}, seen.All(), "only a: b is not selected, c has no store")

	_, err = fxcluster.ForClusters[*corev1.ConfigMap](env.fleet, nil, fxstore.Spec{})
	require.ErrorContains(t, err, "fxcluster.For")
}

// Stores asked for in every member dedupe and plan views per member, as
// the app's own do: two requests of one spec are one store, and a
// narrower spec is a view of a broader one, in each member alike.
func TestMembersDedupeAndPlanViews(t *testing.T) {
	sources := map[string]*fxstoretest.Source{
		"https://a": fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("web", "x", testenv.Labels{"team": "t"})),
		"https://b": fxstoretest.NewSource(clientgoscheme.Scheme),
	}
	env := newFleetEnv(t, sources)
	broad, err := fxcluster.For[*corev1.ConfigMap](env.fleet, fxstore.Spec{}, fxstore.WithConsumer("one"))
	require.NoError(t, err)
	_, err = fxcluster.For[*corev1.ConfigMap](env.fleet, fxstore.Spec{}, fxstore.WithConsumer("two"))
	require.NoError(t, err)
	narrow, err := fxcluster.For[*corev1.ConfigMap](env.fleet, fxstore.Spec{LabelSelector: "team=t"}, fxstore.WithConsumer("three"))
	require.NoError(t, err)
	aware := env.run()
	for _, name := range []fxcluster.ClusterName{"a", "b"} {
		require.NoError(t, aware.Engage(t.Context(), name, configFor("https://"+string(name))))
		info := env.requireState(name, fxcluster.Ready)
		require.Len(t, info.Stores, 2, "in %s: one store of each spec", name)
		byKey := map[string]fxstore.StoreInfo{}
		for _, s := range info.Stores {
			byKey[s.Key.String()] = s
		}
		b := byKey[fmt.Sprintf(`ConfigMap/v1 (cluster %q, all namespaces)`, name)]
		assert.Equal(t, []string{"one", "two"}, b.Consumers, "in %s", name)
		n := byKey[fmt.Sprintf(`ConfigMap/v1 (cluster %q, all namespaces, labels "team=t")`, name)]
		if assert.NotNil(t, n.ViewOf, "in %s: the narrower spec is a view", name) {
			assert.Equal(t, b.Key, *n.ViewOf)
		}
	}
	inA, err := narrow.In("a")
	require.NoError(t, err)
	list, err := inA.List()
	require.NoError(t, err)
	assert.Len(t, list, 1, "the view serves its objects")
	_, err = broad.In("b")
	require.NoError(t, err)
}

// Check binds, as a joining member would, the stores asked for in that
// member: not those asked for in other members only. (A member that
// fails the check: TestDescribeChecksMemberClusters, on an API server.)
func TestCheckBindsTheMembersStores(t *testing.T) {
	sources := map[string]*fxstoretest.Source{
		"https://a": fxstoretest.NewSource(clientgoscheme.Scheme),
		"https://b": fxstoretest.NewSource(clientgoscheme.Scheme),
	}
	env := newFleetEnv(t, sources)
	_, err := fxcluster.For[*corev1.ConfigMap](env.fleet, fxstore.Spec{})
	require.NoError(t, err)
	_, err = fxcluster.ForClusters[*corev1.Secret](env.fleet, []fxcluster.ClusterName{"a"}, fxstore.Spec{})
	require.NoError(t, err)
	keys := func(info fxcluster.ClusterInfo) []string {
		var out []string
		for _, s := range info.Stores {
			out = append(out, s.Key.String())
		}
		return out
	}

	a := env.fleet.Check(t.Context(), "a", configFor("https://a"))
	require.NoError(t, a.Err)
	assert.Equal(t, fxcluster.Ready, a.State)
	assert.Equal(t, []string{`ConfigMap/v1 (cluster "a", all namespaces)`, `Secret/v1 (cluster "a", all namespaces)`}, keys(a))
	b := env.fleet.Check(t.Context(), "b", configFor("https://b"))
	require.NoError(t, b.Err)
	assert.Equal(t, []string{`ConfigMap/v1 (cluster "b", all namespaces)`}, keys(b), "the Secrets are asked for in a only")
}

// A member that leaves lets its reconcile in flight finish before its
// stores stop, and drops the requests queued for it.
func TestLeavingMemberFinishesWorkInFlight(t *testing.T) {
	sources := map[string]*fxstoretest.Source{
		"https://a": fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("web", "one"), testenv.ConfigMap("web", "two")),
	}
	env := newFleetEnv(t, sources)
	configMaps, err := fxcluster.For[*corev1.ConfigMap](env.fleet, fxstore.Spec{})
	require.NoError(t, err)
	started, finish := make(chan struct{}), make(chan struct{})
	var reconciled testenv.Records[string]
	var once sync.Once
	ctrl, err := fxcluster.NewController("slow", configMaps, fxcluster.Func(func(ctx context.Context, req fxcluster.Request) (reconcile.Result, error) {
		once.Do(func() { close(started) })
		<-finish
		store, err := configMaps.In(req.ClusterName)
		if err == nil {
			_, err = store.Get(req.Namespace, req.Name)
		}
		reconciled.Add(req.Name + ": " + errString(err) + ", ctx " + errString(ctx.Err()))
		return reconcile.Result{}, nil
	}))
	require.NoError(t, err)
	aware := env.run(ctrl)
	memberCtx, leave := context.WithCancel(t.Context())
	require.NoError(t, aware.Engage(memberCtx, "a", configFor("https://a")))
	<-started

	leave()
	env.requireState("a", fxcluster.Leaving)
	close(finish)
	require.Eventually(t, func() bool { _, ok := env.state("a"); return !ok }, 10*time.Second, 5*time.Millisecond)
	// The reconcile in flight read its store while the member was
	// leaving; the other request, queued, was dropped.
	all := reconciled.All()
	require.Len(t, all, 1)
	assert.Regexp(t, `^(one|two): <nil>, ctx <nil>$`, all[0])
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// Engaging a name again replaces the member: its stores are the new
// source's.
func TestEngagingAgainReconnects(t *testing.T) {
	sources := map[string]*fxstoretest.Source{
		"https://old": fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("web", "old")),
		"https://new": fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("web", "new")),
	}
	env := newFleetEnv(t, sources)
	configMaps, err := fxcluster.For[*corev1.ConfigMap](env.fleet, fxstore.Spec{})
	require.NoError(t, err)
	aware := env.run()
	names := func() []string {
		store, err := configMaps.In("a")
		if err != nil {
			return nil
		}
		cms, err := store.List()
		if err != nil {
			return nil
		}
		var names []string
		for _, cm := range cms {
			names = append(names, cm.Name)
		}
		return names
	}
	require.NoError(t, aware.Engage(t.Context(), "a", configFor("https://old")))
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]string{"old"}, names()) }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, aware.Engage(t.Context(), "a", configFor("https://new")))
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]string{"new"}, names()) }, 10*time.Second, 5*time.Millisecond)
	info := env.requireState("a", fxcluster.Ready)
	assert.Equal(t, "https://new", info.Host)
	assert.Len(t, env.fleet.Clusters(), 1)
}

// Bad names and configs fail Engage with a message saying what is wrong;
// a store asked for once the fleet runs fails too.
func TestBadEngagementsFail(t *testing.T) {
	env := newFleetEnv(t, map[string]*fxstoretest.Source{})
	aware := env.run()
	tests := []struct {
		give    fxcluster.ClusterName
		cfg     *rest.Config
		wantErr string
	}{
		{give: "", cfg: configFor("https://a"), wantErr: "the empty name is the app's own cluster"},
		{give: "Not_A_Name", cfg: configFor("https://a"), wantErr: `cluster name "Not_A_Name"`},
		{give: "a", wantErr: `cluster "a": no rest config`},
	}
	for _, tt := range tests {
		t.Run(string(tt.give), func(t *testing.T) {
			require.ErrorContains(t, aware.Engage(t.Context(), tt.give, tt.cfg), tt.wantErr)
		})
	}
	_, err := fxcluster.For[*corev1.ConfigMap](env.fleet, fxstore.Spec{})
	require.ErrorContains(t, err, "declare stores and controllers of every member in a constructor")
	_, err = fxcluster.For[*corev1.ConfigMap](fxcluster.NewFleet(clientgoscheme.Scheme, nil, fxcluster.Options{}), fxstore.Spec{LabelSelector: "a=("})
	require.ErrorContains(t, err, "store in every member cluster")
	assert.Empty(t, env.fleet.Clusters())
}

// The app's start waits for the members it names: Warmup returns once
// they have joined, and fails with the cause of one that cannot.
func TestWarmupWaitsForNamedMembers(t *testing.T) {
	tests := []struct {
		name    string
		failB   bool
		wantErr string
	}{
		{name: "both join"},
		{name: "one cannot", failB: true, wantErr: `cluster "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sources := map[string]*fxstoretest.Source{
				"https://a": fxstoretest.NewSource(clientgoscheme.Scheme),
				"https://b": fxstoretest.NewSource(clientgoscheme.Scheme),
			}
			if tt.failB {
				sources["https://b"].Fail(errors.New("b is away"))
			}
			provider := fxcluster.ProviderFunc(func(ctx context.Context, clusters fxcluster.Aware) error {
				require.NoError(t, clusters.Engage(ctx, "a", configFor("https://a")))
				require.NoError(t, clusters.Engage(ctx, "b", configFor("https://b")))
				<-ctx.Done()
				return nil
			})
			fleet := fxcluster.NewFleet(clientgoscheme.Scheme, zaptest.NewLogger(t), fxcluster.Options{
				SyncTimeout: time.Second,
				Providers:   []fxcluster.Provider{provider},
				WaitFor:     []fxcluster.ClusterName{"a", "b"},
				NewSource:   func(c *connection.Connection) fxstore.Source { return sources[c.Config.Host] },
			})
			_, err := fxcluster.For[*corev1.ConfigMap](fleet, fxstore.Spec{})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- fleet.Start(ctx) }()
			defer func() {
				cancel()
				require.NoError(t, <-done)
			}()
			err = fleet.Warmup(ctx)
			if tt.wantErr == "" {
				require.NoError(t, err)
				for _, info := range fleet.Clusters() {
					assert.Equal(t, fxcluster.Ready, info.State, info.Name)
				}
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			require.ErrorContains(t, err, "b is away")
			require.ErrorContains(t, err, "--wait-for-clusters")
		})
	}
}

package test

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
)

// holdCyclesEnv sets how many cycles TestHoldsComeAndGo runs, such as
// FXKUBE_HOLD_CYCLES=10000. Defaults to 1,000.
const holdCyclesEnv = "FXKUBE_HOLD_CYCLES"

// Stores held and released while the app runs, over and over: a store of
// its own, a view of it, and a hold of a store another consumer keeps.
// The store and its view are released in both orders: a view whose
// parent goes first moves to an informer of its own, or is released
// while it moves.
// Goroutines, the heap after GC and the watches open at the API server
// return to their baseline, and the other consumer's store never misses
// an object: after each cycle it equals the API server's LIST.
func TestHoldsComeAndGo(t *testing.T) {
	cycles := 1000
	if s := os.Getenv(holdCyclesEnv); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "%s takes a number of cycles", holdCyclesEnv)
		cycles = n
	}
	cfg := testenv.Config(t)
	ctx := t.Context()
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")
	scheme := k8sruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	for i := range 20 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"team": "a"}}}
		require.NoError(t, direct.Create(ctx, cm))
	}

	reg := fxstore.NewRegistry(scheme, fxstore.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))))
	// The other consumer: a store for the life of the app.
	steady, err := fxstore.For[*corev1.ConfigMap](reg, fxstore.Spec{Namespace: ns})
	require.NoError(t, err)
	conn, err := connection.New(cfg, scheme)
	require.NoError(t, err)
	t.Cleanup(conn.HTTPClient.CloseIdleConnections)
	t.Cleanup(reg.Stop)
	require.NoError(t, reg.Start(ctx, apiserver.NewSource(conn.Client)))
	require.NoError(t, reg.WaitForSync(ctx))

	// One cycle: hold a store of its own (all namespaces), a view of it,
	// and the steady store's spec; wait for them; release them.
	own := fxstore.Spec{LabelSelector: "team=a"}
	// Not in ns by Spec.Namespace, so that the steady store does not
	// cover it: a view of own.
	view := fxstore.Spec{LabelSelector: "team=a", FieldSelector: "metadata.namespace=" + ns}
	cycle := func(i int) {
		o, err := fxstore.Hold[*corev1.ConfigMap](ctx, reg, own, fxstore.WithConsumer("cycle"))
		require.NoError(t, err)
		v, err := fxstore.Hold[*corev1.ConfigMap](ctx, reg, view, fxstore.WithIndex("name", byName), fxstore.WithConsumer("cycle"))
		require.NoError(t, err)
		same, err := fxstore.Hold[*corev1.ConfigMap](ctx, reg, fxstore.Spec{Namespace: ns}, fxstore.WithConsumer("cycle"))
		require.NoError(t, err)
		for _, key := range []fxstore.Key{o.Key(), v.Key()} {
			require.NoError(t, reg.WaitForStore(ctx, key))
		}
		if i == 0 {
			info := testenv.StoreInfo(t, reg, v.Key())
			require.NotNil(t, info.ViewOf, "the namespace's team=a is a view")
			require.Equal(t, o.Key(), *info.ViewOf)
		}
		got, err := v.ByIndex("name", "cm-3")
		require.NoError(t, err)
		require.Len(t, got, 1)
		// Churn the steady store's objects meanwhile.
		var cm corev1.ConfigMap
		require.NoError(t, direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("cm-%d", i%20)}, &cm))
		cm.Data = map[string]string{"cycle": strconv.Itoa(i)}
		require.NoError(t, direct.Update(ctx, &cm))
		switch i % 4 {
		case 0, 2: // the view first
			v.Release()
			same.Release()
			o.Release()
		case 1: // the parent first: the view moves to an informer of its own
			o.Release()
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.Nil(c, testenv.StoreInfo(t, reg, v.Key()).ViewOf)
			}, 10*time.Second, time.Millisecond, "the view moves off its released parent")
			got, err := v.ByIndex("name", "cm-3")
			require.NoError(t, err)
			require.Len(t, got, 1)
			same.Release()
			v.Release()
		case 3: // the parent first, the view at once, while it moves
			o.Release()
			v.Release()
			same.Release()
		}
		same.Release() // twice: no more
	}
	matchesList := func() {
		var list corev1.ConfigMapList
		require.NoError(t, direct.List(ctx, &list, client.InNamespace(ns)))
		want := make([]string, len(list.Items))
		for i, cm := range list.Items {
			want[i] = cm.Name + "@" + cm.ResourceVersion
		}
		slices.Sort(want)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			objs, err := steady.List()
			require.NoError(c, err)
			got := make([]string, len(objs))
			for i, cm := range objs {
				got[i] = cm.Name + "@" + cm.ResourceVersion
			}
			slices.Sort(got)
			require.Equal(c, want, got)
		}, 10*time.Second, time.Millisecond, "the steady store holds what the API server lists")
	}

	// A few cycles warm what is made once: HTTP/2 streams, the access
	// reviews remembered, the shared parts' tables.
	for i := range 3 {
		cycle(i)
	}
	matchesList()
	baseline := measureHolds(t, cfg)
	t.Logf("baseline: %d goroutines, %.1f MiB heap after GC, %v watches open", baseline.goroutines, mib(baseline.heap), baseline.watches)
	for i := range cycles {
		cycle(i)
		matchesList()
	}
	var after holdFigures
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		after = measureHolds(t, cfg)
		assert.LessOrEqual(c, after.goroutines, baseline.goroutines+2, "goroutines")
		assert.Equal(c, baseline.watches, after.watches, "watches open at the API server")
		assert.Less(c, after.heap, baseline.heap+2<<20, "heap after GC")
	}, 30*time.Second, 100*time.Millisecond)
	t.Logf("after %d cycles: %d goroutines, %.1f MiB heap after GC, %v watches open", cycles, after.goroutines, mib(after.heap), after.watches)
	info := testenv.StoreInfo(t, reg, steady.Key())
	require.Equal(t, []string{"test.TestHoldsComeAndGo"}, info.Consumers, "the cycles' holds are gone")
	require.Len(t, reg.Stores(), 1, "only the steady store is left")
}

// holdFigures are what TestHoldsComeAndGo compares to its baseline.
type holdFigures struct {
	goroutines int
	heap       uint64
	watches    float64 // ConfigMap watches open at the API server
}

func measureHolds(t *testing.T, cfg *rest.Config) holdFigures {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return holdFigures{
		goroutines: runtime.NumGoroutine(),
		heap:       m.HeapAlloc,
		watches:    scrapeRequests(t, cfg, "configmaps").OpenWatches,
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func byName(cm *corev1.ConfigMap) []string { return []string{cm.Name} }

// Package sharding_test runs sharded stores against a real kube-apiserver
// with the ShardedListAndWatch feature gate (KEP-5866) on, where the API
// server sends each store only its shard, and against one with the gate
// off, where the store filters on the client.
package sharding_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/controlplane"
	"github.com/fxkube/fxkube/internal/storehooks"
	"github.com/fxkube/fxkube/internal/testenv"
)

func TestMain(m *testing.M) {
	// envtest logs through controller-runtime's logger; unset, it prints a
	// warning with a stack trace when a control plane starts 30 s into the
	// run, as the one without the gate does.
	ctrllog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(removingBinary{testenv.WithControlPlane(m, controlplane.WithFeatureGates(map[string]bool{"ShardedListAndWatch": true}))})
}

// removingBinary removes the binary buildApp built, and stops the control
// plane without the gate, once the tests have run.
type removingBinary struct{ m interface{ Run() int } }

func (r removingBinary) Run() int {
	code := r.m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if gateOff.cp != nil {
		if err := gateOff.cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop the control plane without the gate:", err)
			code = 1
		}
	}
	return code
}

// gateOff is a control plane with ShardedListAndWatch off, started by the
// first test that needs it, for the tests "WithoutTheGate".
var gateOff struct {
	once sync.Once
	cp   *controlplane.Running
	err  error
}

// withoutTheGate returns the control plane with the gate off.
func withoutTheGate(t *testing.T) *controlplane.Running {
	t.Helper()
	gateOff.once.Do(func() {
		dir, err := controlplane.AssetsDir()
		if err != nil {
			gateOff.err = err
			return
		}
		gateOff.cp, gateOff.err = controlplane.Start(dir)
	})
	require.NoError(t, gateOff.err)
	return gateOff.cp
}

// halves returns the shard selectors of the lower and upper half of the
// hash space on key.
func halves(key string) (lower, upper sharding.Selector) {
	return sharding.NewSelector(sharding.ShardRangeRequirement{Key: key, Start: "0x0000000000000000", End: "0x8000000000000000"}),
		sharding.NewSelector(sharding.ShardRangeRequirement{Key: key, Start: "0x8000000000000000", End: "0x10000000000000000"})
}

// With the gate on, the API server sends each sharded store only its shard:
// it receives no object outside it.
func TestShardedStores(t *testing.T) {
	checkShardedStores(t, testenv.Config(t), true)
}

// With the gate off, the API server sends every object; the stores hold
// the same shards, filtered on the client, and say so once.
func TestShardedStoresWithoutTheGate(t *testing.T) {
	checkShardedStores(t, rest.CopyConfig(withoutTheGate(t).Config), false)
}

func checkShardedStores(t *testing.T, cfg *rest.Config, serverFilters bool) {
	ctx := t.Context()
	scheme := k8sruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)

	// At least 4 namespaces, with one in each half of the namespace hash
	// space: otherwise a namespace shard's store receives nothing outside
	// it (all 4 in one half: 1 run in 8).
	nsLower, nsUpper := halves(fxstore.ShardByNamespace)
	var (
		namespaces []string
		inHalf     = map[sharding.Selector]int{}
	)
	for len(namespaces) < 4 || inHalf[nsLower] == 0 || inHalf[nsUpper] == 0 {
		require.Less(t, len(namespaces), 40, "namespaces fall in both halves")
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shard-"}}
		require.NoError(t, direct.Create(ctx, ns))
		namespaces = append(namespaces, ns.Name)
		for _, half := range []sharding.Selector{nsLower, nsUpper} {
			if ok, err := half.Matches(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name}}); err == nil && ok {
				inHalf[half]++
			}
		}
	}
	const perNamespace = 40
	create := func(ns string, i int) {
		t.Helper()
		require.NoError(t, direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("cm-%03d", i), Labels: map[string]string{"app": "shard-test"},
		}}))
	}
	for _, ns := range namespaces {
		for i := range perNamespace {
			create(ns, i)
		}
	}

	core, logs := observer.New(zapcore.WarnLevel)
	reg := fxstore.NewRegistry(scheme, fxstore.WithLogger(zap.New(core)))
	spec := func(shard sharding.Selector) fxstore.Spec {
		return fxstore.Spec{LabelSelector: "app=shard-test", Shard: shard}
	}
	all, err := fxstore.For[*corev1.ConfigMap](reg, spec(nil))
	require.NoError(t, err)
	uidLower, uidUpper := halves(fxstore.ShardByUID)
	shards := map[sharding.Selector]*fxstore.Store[*corev1.ConfigMap]{}
	for _, sel := range []sharding.Selector{uidLower, uidUpper, nsLower, nsUpper} {
		s, err := fxstore.For[*corev1.ConfigMap](reg, spec(sel))
		require.NoError(t, err)
		shards[sel] = s
	}
	conn, err := connection.New(cfg, scheme)
	require.NoError(t, err)
	t.Cleanup(conn.HTTPClient.CloseIdleConnections)
	t.Cleanup(reg.Stop)
	require.NoError(t, reg.Start(ctx, apiserver.NewSource(conn.Client)))
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, reg.WaitForSync(syncCtx))
	for _, info := range reg.Stores() {
		assert.Nil(t, info.ViewOf, "%s: a sharded store is never a view, nor is the store of all a view of one", info.Key)
	}

	// Each shard holds exactly the objects the selector matches, and the
	// halves of each key cover all of them, once.
	check := func(c *assert.CollectT) {
		everything, err := all.List()
		if !assert.NoError(c, err) {
			return
		}
		want := map[sharding.Selector][]string{}
		for _, o := range everything {
			for sel := range shards {
				if ok, err := sel.Matches(o); assert.NoError(c, err) && ok {
					want[sel] = append(want[sel], o.Namespace+"/"+o.Name)
				}
			}
		}
		for sel, s := range shards {
			held, err := s.List()
			if !assert.NoError(c, err) {
				return
			}
			got := make([]string, len(held))
			for i, o := range held {
				got[i] = o.Namespace + "/" + o.Name
			}
			assert.ElementsMatch(c, want[sel], got, "store %s", s)
		}
		assert.Len(c, slices.Concat(want[uidLower], want[uidUpper]), len(everything), "the uid halves split the objects")
		assert.Len(c, slices.Concat(want[nsLower], want[nsUpper]), len(everything), "the namespace halves split the objects")
		assert.NotEmpty(c, want[uidLower])
		assert.NotEmpty(c, want[uidUpper])
	}
	require.EventuallyWithT(t, check, 10*time.Second, 50*time.Millisecond, "after the initial lists")

	// Churn: creations and deletions reach each shard's store, and only
	// its own.
	for i := range 20 {
		create(namespaces[i%len(namespaces)], perNamespace+i)
	}
	for i := range 10 {
		require.NoError(t, direct.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespaces[i%len(namespaces)], Name: fmt.Sprintf("cm-%03d", i)}}))
	}
	require.EventuallyWithT(t, check, 10*time.Second, 50*time.Millisecond, "after churn")

	infos := map[string]fxstore.StoreInfo{}
	for _, info := range reg.Stores() {
		infos[info.Key.String()] = info
	}
	warned := logs.FilterMessageSnippet("does not apply shard selectors").All()
	for _, s := range shards {
		dropped := infos[s.String()].Status.OutsideShard
		if serverFilters {
			assert.Zero(t, dropped, "%s: the API server sent only the shard", s)
		} else {
			assert.Positive(t, dropped, "%s: the API server sent other shards' objects, dropped", s)
		}
	}
	if serverFilters {
		assert.Empty(t, warned)
	} else {
		stores := map[string]int{}
		for _, e := range warned {
			stores[fmt.Sprint(e.ContextMap()["store"])]++
		}
		assert.Equal(t, len(shards), len(stores), "every sharded store says so: %v", slices.Collect(maps.Keys(stores)))
		for store, n := range stores {
			assert.Equal(t, 1, n, "%s says so once", store)
		}
	}

	// Asked, the source tells whether the API server applies shard
	// selectors; sharded stores asked for afterwards list and watch their
	// shard if it does, and are views of the store of all if it does not.
	applied, err := storehooks.Get[*fxstore.Registry, fxstore.Key, fxstore.Spec, fxstore.Option]().CheckShardSelectors(ctx, reg, all.Key())
	require.NoError(t, err)
	require.Equal(t, serverFilters, applied, "the API server says whether it applied the selector")
	quarter := sharding.NewSelector(sharding.ShardRangeRequirement{Key: fxstore.ShardByUID, Start: "0x4000000000000000", End: "0x8000000000000000"})
	late, err := fxstore.For[*corev1.ConfigMap](reg, spec(quarter))
	require.NoError(t, err)
	require.NoError(t, reg.WaitForStore(syncCtx, late.Key()))
	for _, info := range reg.Stores() {
		if info.Key != late.Key() {
			continue
		}
		if serverFilters {
			assert.Nil(t, info.ViewOf, "the API server selects the shard")
		} else if assert.NotNil(t, info.ViewOf, "a view of the store of all") {
			assert.Equal(t, all.Key(), *info.ViewOf)
		}
		assert.Equal(t, !serverFilters, info.Status.ShardOnClient)
	}
	shards[quarter] = late
	require.EventuallyWithT(t, check, 10*time.Second, 50*time.Millisecond, "a shard asked for late")
	for _, ns := range namespaces {
		assert.NoError(t, direct.DeleteAllOf(context.Background(), &corev1.ConfigMap{}, client.InNamespace(ns)))
	}
}

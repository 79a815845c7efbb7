package storecache_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/storecache"
)

// ownerIndex returns a new closure each call, as index helpers often do.
func ownerIndex() client.IndexerFunc {
	return func(o client.Object) []string { return []string{o.GetLabels()["owner"]} }
}

func stripA() crcache.Options {
	return crcache.Options{DefaultTransform: crcache.TransformStripManagedFields()}
}

func stripB() crcache.Options {
	return crcache.Options{DefaultTransform: crcache.TransformStripManagedFields()}
}

// Caches asking for the same spec share one store, whatever closures of one
// function their transforms and indexes are, even inlined into different
// callers, and controller-runtime's TransformStripManagedFields is fxstore's
// default.
func TestCachesShareStoresAcrossClosures(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	mapper := meta.NewDefaultRESTMapper(nil)
	for i, opts := range []crcache.Options{stripA(), stripB(), {}} {
		c, err := storecache.New(r, mapper, opts, storecache.WithConsumer([]string{"a", "b", "c"}[i]))
		require.NoError(t, err)
		require.NoError(t, c.IndexField(context.Background(), &corev1.ConfigMap{}, "owner", ownerIndex()))
	}
	stores := r.Stores()
	require.Len(t, stores, 1, "%v", stores)
	assert.Equal(t, fxstore.StripManagedFields.Name, stores[0].Key.Transform)
	assert.Equal(t, []string{"a", "b", "c"}, stores[0].Consumers)
	require.Len(t, stores[0].Indexes, 1, "caches indexing a field with the same function value share the index: %q", stores[0].Indexes)
	assert.True(t, strings.HasPrefix(stores[0].Indexes[0], fxstore.FieldIndexName("owner")+" by func at "), stores[0].Indexes[0])

	// Another cache indexes the same field with a function of its own: its
	// index is its own, as each controller-runtime cache's is.
	other, err := storecache.New(r, mapper, crcache.Options{}, storecache.WithConsumer("d"))
	require.NoError(t, err)
	require.NoError(t, other.IndexField(context.Background(), &corev1.ConfigMap{}, "owner", func(client.Object) []string { return nil }))
	assert.Len(t, r.Stores()[0].Indexes, 2)
	// One cache indexing a field twice is a conflict, as in
	// controller-runtime's informer.
	err = other.IndexField(context.Background(), &corev1.ConfigMap{}, "owner", ownerIndex())
	assert.ErrorContains(t, err, `cache of d: indexer conflict: field "owner" of ConfigMap/v1 is indexed already; index each field once`)

	// An index declared on a kind the cache has read already adds no
	// request.
	require.NoError(t, other.IndexField(context.Background(), &corev1.ConfigMap{}, "team", ownerIndex()))
	assert.Equal(t, []string{"a", "b", "c", "d"}, r.Stores()[0].Consumers, "no request more")
}

// dropAnnotation returns a transform that drops one annotation: closures of
// one literal that capture different values.
func dropAnnotation(key string) func(any) (any, error) {
	return func(obj any) (any, error) {
		if o, ok := obj.(client.Object); ok {
			a := o.GetAnnotations()
			delete(a, key)
			o.SetAnnotations(a)
		}
		return obj, nil
	}
}

// Transforms are shared only as the same function value: closures of one
// literal may capture different values.
func TestCacheTransformsAreFunctionValues(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	mapper := meta.NewDefaultRESTMapper(nil)
	shared := dropAnnotation("c")
	for _, fn := range []func(any) (any, error){dropAnnotation("a"), dropAnnotation("b"), shared, shared} {
		c, err := storecache.New(r, mapper, crcache.Options{DefaultTransform: fn})
		require.NoError(t, err)
		_, err = c.GetInformer(context.Background(), &corev1.ConfigMap{})
		require.NoError(t, err)
	}
	assert.Len(t, r.Stores(), 3, "a, b, and c shared")
}

// Namespaces for a cluster-scoped kind are an error, as in controller-runtime's
// cache.New, once the mapper tells the kind's scope.
func TestCacheRejectsNamespacesOfClusterScopedKinds(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(rbacv1.SchemeGroupVersion.WithKind("ClusterRole"), meta.RESTScopeRoot)
	c, err := storecache.New(r, mapper, crcache.Options{ByObject: map[client.Object]crcache.ByObject{
		&rbacv1.ClusterRole{}: {Namespaces: map[string]crcache.Config{"a": {}}},
	}}, storecache.WithConsumer("ops"))
	require.NoError(t, err, "the scope is not known while the app is built")
	fxstoretest.Start(t, r, fxstoretest.NewSource(clientgoscheme.Scheme))
	_, err = c.GetInformer(context.Background(), &rbacv1.ClusterRole{})
	assert.ErrorContains(t, err, "cache options of ops: ClusterRole.rbac.authorization.k8s.io/v1 is not namespaced, but its ByObject.Namespaces setting is not nil")
}

// Every option prints as the call that made it, as fx's options do.
func TestOptionsPrintTheirCall(t *testing.T) {
	tests := []struct {
		give storecache.Option
		want string
	}{
		{storecache.WithConsumer("operator"), `storecache.WithConsumer("operator")`},
		{storecache.WithLateSyncTimeout(30 * time.Second), `storecache.WithLateSyncTimeout(30s)`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.give.String())
	}
}

// twoCaches returns a registry and two caches of it, consumers a and b,
// that map ConfigMaps.
func twoCaches(t *testing.T) (r *fxstore.Registry, a, b crcache.Cache) {
	r = fxstore.NewRegistry(clientgoscheme.Scheme)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	a, err := storecache.New(r, mapper, crcache.Options{}, storecache.WithConsumer("a"))
	require.NoError(t, err)
	b, err = storecache.New(r, mapper, crcache.Options{}, storecache.WithConsumer("b"))
	require.NoError(t, err)
	return r, a, b
}

// RemoveInformer gives back one cache's hold on a kind's store, as
// controller-runtime's removes that cache's informer: another cache
// reading the kind keeps its store, and once none holds it, the store
// stops. A read afterwards asks for the store again.
func TestRemoveInformerReleasesOneCachesHold(t *testing.T) {
	r, a, b := twoCaches(t)
	src := fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("ns", "x"))
	fxstoretest.Start(t, r, src)
	key := client.ObjectKey{Namespace: "ns", Name: "x"}
	var cm corev1.ConfigMap
	require.NoError(t, a.Get(t.Context(), key, &cm))
	require.NoError(t, b.Get(t.Context(), key, &cm))
	require.Len(t, r.Stores(), 1)
	require.Equal(t, []string{"a", "b"}, r.Stores()[0].Consumers)

	require.NoError(t, a.RemoveInformer(t.Context(), &corev1.ConfigMap{}))
	require.NoError(t, a.RemoveInformer(t.Context(), &corev1.ConfigMap{}), "removing again does nothing")
	require.Equal(t, []string{"b"}, r.Stores()[0].Consumers, "the other cache keeps its store")
	require.NoError(t, src.Client().Create(t.Context(), testenv.ConfigMap("ns", "y")))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, b.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "y"}, &cm))
	}, 10*time.Second, 10*time.Millisecond, "the store still runs")

	require.NoError(t, a.Get(t.Context(), key, &cm), "a read asks for the store again")
	require.Equal(t, []string{"b", "a"}, r.Stores()[0].Consumers)
	require.NoError(t, a.RemoveInformer(t.Context(), &corev1.ConfigMap{}))
	require.NoError(t, b.RemoveInformer(t.Context(), &corev1.ConfigMap{}))
	require.Empty(t, r.Stores(), "no cache holds it: it stops")
}

// As controller-runtime's RemoveInformer stops the informer, removing a
// kind silences the handlers added through the cache's informer for it,
// and that informer says it stopped. Another cache's handlers on the same
// store go on.
func TestRemoveInformerSilencesOnlyThatCachesHandlers(t *testing.T) {
	r, a, b := twoCaches(t)
	src := fxstoretest.NewSource(clientgoscheme.Scheme)
	fxstoretest.Start(t, r, src)

	added := func(c crcache.Cache) (crcache.Informer, *atomic.Int32) {
		inf, err := c.GetInformer(t.Context(), &corev1.ConfigMap{})
		require.NoError(t, err)
		var n atomic.Int32
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { n.Add(1) }})
		require.NoError(t, err)
		return inf, &n
	}
	infA, addsA := added(a)
	infB, addsB := added(b)
	require.NoError(t, src.Client().Create(t.Context(), testenv.ConfigMap("ns", "x")))
	require.Eventually(t, func() bool { return addsA.Load() == 1 && addsB.Load() == 1 }, 10*time.Second, time.Millisecond)

	require.NoError(t, a.RemoveInformer(t.Context(), &corev1.ConfigMap{}))
	assert.True(t, infA.IsStopped(), "the removed kind's informer")
	assert.False(t, infB.IsStopped(), "the other cache's")
	_, err := infA.AddEventHandler(toolscache.ResourceEventHandlerFuncs{})
	require.ErrorContains(t, err, "RemoveInformer")
	require.NoError(t, src.Client().Create(t.Context(), testenv.ConfigMap("ns", "y")))
	require.Eventually(t, func() bool { return addsB.Load() == 2 }, 10*time.Second, time.Millisecond, "b hears y")
	assert.Equal(t, int32(1), addsA.Load(), "a no longer hears its removed kind")

	infA, addsA = added(a)
	require.Eventually(t, func() bool { return addsA.Load() == 2 }, 10*time.Second, time.Millisecond,
		"asked again, a hears what the store holds")
	assert.False(t, infA.IsStopped())
}

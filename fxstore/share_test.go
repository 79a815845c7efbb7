package fxstore_test

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

// A store's objects share the parts they repeat; with WithoutSharing, a
// store's objects hold their own, on an informer of the store's own.
func TestStoresShareWhatObjectsRepeat(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	shared, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	unshared, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "app=web"}, fxstore.WithoutSharing())
	require.NoError(t, err)
	data := map[string]string{"config.yaml": "replicas: 3\n"}
	fxstoretest.Start(t, r, fxstoretest.NewSource(clientgoscheme.Scheme,
		testenv.ConfigMap("a", "web", testenv.Labels{"app": "web"}, testenv.Data(data)),
		testenv.ConfigMap("b", "web", testenv.Labels{"app": "web"}, testenv.Data(data)),
	))

	n, views := informers(r)
	assert.Equal(t, 2, n, "the store without sharing is no view: %v", views)
	for _, tt := range []struct {
		store *fxstore.Store[*corev1.ConfigMap]
		same  bool
	}{{shared, true}, {unshared, false}} {
		a, err := tt.store.Get("a", "web")
		require.NoError(t, err)
		b, err := tt.store.Get("b", "web")
		require.NoError(t, err)
		assert.Equal(t, a.Data, b.Data)
		assert.Equal(t, tt.same, sameMap(a.Data, b.Data), "%s: data", tt.store)
		assert.Equal(t, tt.same, sameMap(a.Labels, b.Labels), "%s: labels", tt.store)
	}
}

func sameMap(a, b map[string]string) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}

// Each store estimates the heap its objects take: less with sharing than
// without, nothing of its own for a view. The metric says the same.
func TestStoreBytes(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	_, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a"})
	require.NoError(t, err)
	_, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "app=web"}, fxstore.WithoutSharing())
	require.NoError(t, err)
	var objs []client.Object
	for i := range 50 {
		data := map[string]string{"config.yaml": strings.Repeat("replicas: 3\n", 100)}
		objs = append(objs, testenv.ConfigMap("a", fmt.Sprintf("web-%d", i), testenv.Labels{"app": "web"}, testenv.Data(data)))
	}
	fxstoretest.Start(t, r, fxstoretest.NewSource(clientgoscheme.Scheme, objs...))

	bytes := map[string]int64{}
	for _, s := range r.Stores() {
		assert.Equal(t, 50, s.Objects, "%s", s.Key)
		bytes[s.Key.String()] = s.Bytes
	}
	all, view, unshared := bytes["ConfigMap/v1 (all namespaces)"], bytes[`ConfigMap/v1 (namespace "a")`], bytes[`ConfigMap/v1 (all namespaces, labels "app=web")`]
	t.Logf("heap estimated: %v", bytes)
	// Each object holds 1,200 bytes of data: 60,000 bytes unshared.
	assert.Greater(t, unshared, int64(60_000), "unshared")
	assert.Less(t, all, unshared/4, "shared: the data is held once")
	assert.Zero(t, view, "a view holds its parent's objects")

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(r))
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]int64{}
	for _, f := range families {
		if f.GetName() == "fxkube_store_bytes" {
			for _, m := range f.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = int64(m.GetGauge().GetValue())
			}
		}
	}
	assert.Equal(t, bytes, got, "fxkube_store_bytes")
}

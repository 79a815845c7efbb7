package fxstore_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
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
		configMap("a", "web", map[string]string{"app": "web"}, data),
		configMap("b", "web", map[string]string{"app": "web"}, data),
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
		assert.Equal(t, tt.same, unsafe.StringData(a.Name) == unsafe.StringData(b.Name), "%s: names", tt.store)
	}
}

func sameMap(a, b map[string]string) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}

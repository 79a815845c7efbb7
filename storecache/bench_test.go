package storecache_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/storecache"
)

// BenchmarkCacheGet is a hosted operator's Get through the cache façade:
// a deep copy into the caller's object, as controller-runtime's cache
// gives, of a store of its own and of a view.
func BenchmarkCacheGet(b *testing.B) {
	objs := make([]client.Object, 10_000)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%10), Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"i": fmt.Sprint(i / 10 % 2)}}}
	}
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(b, err)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	own, err := storecache.New(r, mapper, crcache.Options{})
	require.NoError(b, err)
	view, err := storecache.New(r, mapper, crcache.Options{DefaultLabelSelector: labels.SelectorFromSet(labels.Set{"i": "1"})})
	require.NoError(b, err)
	// The kinds resolve to their stores before the registry starts.
	require.NoError(b, own.IndexField(b.Context(), &corev1.ConfigMap{}, "x", func(client.Object) []string { return nil }))
	require.NoError(b, view.IndexField(b.Context(), &corev1.ConfigMap{}, "x", func(client.Object) []string { return nil }))
	fxstoretest.Start(b, r, fxstoretest.NewSource(clientgoscheme.Scheme, objs...))
	for _, c := range []struct {
		name  string
		cache crcache.Cache
		key   client.ObjectKey
	}{{"own", own, client.ObjectKey{Namespace: "ns-7", Name: "cm-4007"}}, {"view", view, client.ObjectKey{Namespace: "ns-7", Name: "cm-4017"}}} {
		b.Run("store="+c.name, func(b *testing.B) {
			var cm corev1.ConfigMap
			b.ReportAllocs()
			for b.Loop() {
				if err := c.cache.Get(b.Context(), c.key, &cm); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

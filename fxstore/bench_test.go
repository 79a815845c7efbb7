package fxstore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
)

// benchStore returns a synced store of n ConfigMaps spread over 10
// namespaces.
func benchStore(b *testing.B, n int) *fxstore.Store[*corev1.ConfigMap] {
	b.Helper()
	objs := make([]client.Object, n)
	for i := range objs {
		objs[i] = configMap(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("cm-%d", i), map[string]string{"i": fmt.Sprint(i / 10 % 2)}, nil)
	}
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	s, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(b, err)
	fxstoretest.Start(b, r, fxstoretest.NewSource(clientgoscheme.Scheme, objs...))
	return s
}

func BenchmarkStoreGet(b *testing.B) {
	s := benchStore(b, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get("ns-7", "cm-4567"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStoreListNamespace(b *testing.B) {
	s := benchStore(b, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		objs, err := s.List(client.InNamespace("ns-3"))
		if err != nil || len(objs) != 1000 {
			b.Fatal(len(objs), err)
		}
	}
}

func BenchmarkStoreListLabels(b *testing.B) {
	s := benchStore(b, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		objs, err := s.List(client.InNamespace("ns-3"), client.MatchingLabels{"i": "1"})
		if err != nil || len(objs) != 500 {
			b.Fatal(len(objs), err)
		}
	}
}

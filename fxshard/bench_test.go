package fxshard

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
)

// benchShardedStore returns a sharded store of n ConfigMaps spread over 10
// namespaces, holding every bucket, each synced.
func benchShardedStore(b *testing.B, n int) *Store[*corev1.ConfigMap] {
	b.Helper()
	// Random uids, the same each run, spread the objects over the buckets.
	random := rand.New(rand.NewPCG(1, 2))
	objs := make([]client.Object, n)
	for i := range objs {
		uid := fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", random.Uint32(), random.Uint32()&0xffff, random.Uint32()&0xffff, random.Uint32()&0xffff, random.Uint64()&0xffffffffffff)
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: fmt.Sprintf("ns-%d", i%10), Name: fmt.Sprintf("cm-%d", i), UID: types.UID(uid),
		}}
	}
	reg := fxstore.NewRegistry(clientgoscheme.Scheme)
	shards, err := NewShards(reg, fake.NewClientset(), Config{Namespace: "ops", Name: "app"})
	require.NoError(b, err)
	store, err := For[*corev1.ConfigMap](shards, fxstore.Spec{}, fxstore.ShardByUID)
	require.NoError(b, err)
	fxstoretest.Start(b, reg, fxstoretest.NewSource(clientgoscheme.Scheme, objs...))
	buckets := shards.coordinator.Buckets()
	for bucket := range buckets.Len() {
		sel, err := buckets.Selector(fxstore.ShardByUID, []int{bucket})
		require.NoError(b, err)
		require.NoError(b, store.acquire(bucket, sel))
	}
	require.NoError(b, store.WaitForSync(b.Context()))
	count, err := store.Count()
	require.NoError(b, err)
	require.Equal(b, n, count)
	return store
}

func BenchmarkShardedStoreGet(b *testing.B) {
	s := benchShardedStore(b, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get("ns-7", "cm-4567"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkShardedStoreListNamespace(b *testing.B) {
	s := benchShardedStore(b, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		objs, err := s.List(client.InNamespace("ns-3"))
		if err != nil || len(objs) != 1000 {
			b.Fatal(len(objs), err)
		}
	}
}

func BenchmarkShardedStoreCount(b *testing.B) {
	s := benchShardedStore(b, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		if n, err := s.Count(); err != nil || n != 10_000 {
			b.Fatal(n, err)
		}
	}
}

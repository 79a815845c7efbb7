package fxstore_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

// benchStore returns a synced store of n ConfigMaps spread over 10
// namespaces.
func benchStore(b *testing.B, n int) *fxstore.Store[*corev1.ConfigMap] {
	b.Helper()
	objs := make([]client.Object, n)
	for i := range objs {
		objs[i] = testenv.ConfigMap(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("cm-%d", i), testenv.Labels{"i": fmt.Sprint(i / 10 % 2)})
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

// benchViewPair returns two synced stores of half the n ConfigMaps each:
// those labelled i=1, a view of the store of all of them, and those
// labelled i=0, with an informer of its own, to compare reads on either.
func benchViewPair(b *testing.B, n int) (view, own *fxstore.Store[*corev1.ConfigMap]) {
	b.Helper()
	objs := make([]client.Object, n)
	for i := range objs {
		objs[i] = testenv.ConfigMap(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("cm-%d", i), testenv.Labels{"i": fmt.Sprint(i / 10 % 2)})
	}
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(b, err)
	view, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "i=1"})
	require.NoError(b, err)
	own, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "i=0"}, fxstore.WithOwnInformer())
	require.NoError(b, err)
	fxstoretest.Start(b, r, fxstoretest.NewSource(clientgoscheme.Scheme, objs...))
	for _, s := range r.Stores() {
		if (s.Key == view.Key()) != (s.ViewOf != nil) {
			b.Fatalf("%s: view of %v", s.Key, s.ViewOf)
		}
	}
	return view, own
}

// BenchmarkViewReads compares Get and List on a view with the same reads
// on a store of the same spec that has an informer of its own.
func BenchmarkViewReads(b *testing.B) {
	view, own := benchViewPair(b, 10_000)
	for _, s := range []struct {
		name  string
		store *fxstore.Store[*corev1.ConfigMap]
		get   string
	}{{"view", view, "cm-4017"}, {"own", own, "cm-4007"}} {
		b.Run("op=Get/store="+s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.store.Get("ns-7", s.get); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("op=List-namespace/store="+s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				objs, err := s.store.List(client.InNamespace("ns-3"))
				if err != nil || len(objs) != 500 {
					b.Fatal(len(objs), err)
				}
			}
		})
	}
}

// metadataStores returns a started registry of a typed store of all of n
// ConfigMaps and, unless meta is "", a metadata-only store of all of them:
// a view of the typed store ("view") or one with an informer of its own
// ("own").
func metadataStores(b *testing.B, n int, meta string) (*fxstore.Registry, *fxstore.Store[*metav1.PartialObjectMetadata]) {
	b.Helper()
	objs := make([]client.Object, n)
	for i := range objs {
		objs[i] = testenv.ConfigMap(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("cm-%d", i),
			testenv.Labels{"app": "bench", "i": fmt.Sprint(i)}, testenv.Data{"config": strings.Repeat("x", 256)})
	}
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(b, err)
	var m *fxstore.Store[*metav1.PartialObjectMetadata]
	if meta != "" {
		var opts []fxstore.Option
		if meta == "own" {
			opts = append(opts, fxstore.WithOwnInformer())
		}
		m, err = fxstore.For[*metav1.PartialObjectMetadata](r, fxstore.Spec{Kind: configMapKind}, opts...)
		require.NoError(b, err)
	}
	fxstoretest.Start(b, r, fxstoretest.NewSource(clientgoscheme.Scheme, objs...))
	if _, views := informers(r); (len(views) == 1) != (meta == "view") {
		b.Fatalf("%s: views %v", meta, views)
	}
	return r, m
}

// BenchmarkMetadataView compares a metadata-only store served as a view of
// a typed store (its objects made on each read) with one that has an
// informer of its own (a second copy of every object's metadata): reads,
// and the heap the metadata-only store adds to the typed store's.
func BenchmarkMetadataView(b *testing.B) {
	const n = 10_000
	for _, meta := range []string{"view", "own"} {
		// Each store's registry is stopped, and its objects freed, before
		// the next one's starts: reads that allocate pay for the heap they
		// share.
		b.Run("store="+meta, func(b *testing.B) {
			_, m := metadataStores(b, n, meta)
			b.Run("op=Get", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := m.Get("ns-7", "cm-4567"); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("op=List-namespace", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					objs, err := m.List(client.InNamespace("ns-3"))
					if err != nil || len(objs) != n/10 {
						b.Fatal(len(objs), err)
					}
				}
			})
		})
	}
	// The heap after starting the typed store alone, and with either
	// metadata-only store: the fake source's copies are in each and cancel
	// out in the differences.
	heap := func(meta string) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r, _ := metadataStores(b, n, meta)
		runtime.GC()
		runtime.ReadMemStats(&after)
		r.Stop()
		return float64(after.HeapAlloc) - float64(before.HeapAlloc)
	}
	b.Run("op=heap", func(b *testing.B) {
		var typed, view, own float64
		for b.Loop() {
			typed += heap("")
			view += heap("view")
			own += heap("own")
		}
		runs := float64(b.N) * (1 << 20)
		b.ReportMetric((view-typed)/runs, "view-MiB")
		b.ReportMetric((own-typed)/runs, "own-MiB")
	})
}

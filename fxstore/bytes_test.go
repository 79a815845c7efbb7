package fxstore_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
)

// A store held as bytes reads, indexes and sends events as any other,
// each read a copy of its own; it is no view's parent.
func TestHeldAsBytes(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	typed, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.HeldAsBytes(), fxstore.WithIndex("app", byApp))
	require.NoError(t, err)
	// Unstructured objects are held as JSON.
	dynamic, err := fxstore.For[*unstructured.Unstructured](r, fxstore.Spec{Kind: configMapKind}, fxstore.HeldAsBytes())
	require.NoError(t, err)
	narrow, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a"})
	require.NoError(t, err)

	var (
		mu     sync.Mutex
		events []string
	)
	_, err = typed.Subscribe(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, "add "+obj.(*corev1.ConfigMap).Data["k"])
		},
		UpdateFunc: func(_, obj any) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, "update "+obj.(*corev1.ConfigMap).Data["k"])
		},
		DeleteFunc: func(obj any) {
			mu.Lock()
			defer mu.Unlock()
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			events = append(events, "delete "+obj.(*corev1.ConfigMap).Name)
		},
	})
	require.NoError(t, err)
	src := fxstoretest.NewSource(clientgoscheme.Scheme,
		configMap("a", "web", map[string]string{"app": "web"}, map[string]string{"k": "1"}),
		configMap("b", "db", map[string]string{"app": "db"}, map[string]string{"k": "2"}),
	)
	fxstoretest.Start(t, r, src)

	n, views := informers(r)
	assert.Equal(t, 3, n, "no store is a view of one held as bytes: %v", views)

	a1, err := typed.Get("a", "web")
	require.NoError(t, err)
	a2, err := typed.Get("a", "web")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"k": "1"}, a1.Data)
	assert.Equal(t, map[string]string{"app": "web"}, a1.Labels)
	assert.NotSame(t, a1, a2, "each read decodes a copy")
	byApp, err := typed.ByIndex("app", "db")
	require.NoError(t, err)
	require.Len(t, byApp, 1)
	assert.Equal(t, "db", byApp[0].Name)
	inA, err := typed.List(client.InNamespace("a"))
	require.NoError(t, err)
	assert.Len(t, inA, 1)
	count, err := typed.Count()
	require.NoError(t, err)
	assert.Equal(t, 2, count)

	u, err := dynamic.Get("b", "db")
	require.NoError(t, err)
	assert.Equal(t, "ConfigMap", u.GetKind(), "the kind is kept")
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	assert.Equal(t, map[string]string{"k": "2"}, data)

	for _, s := range r.Stores() {
		if s.Key == typed.Key() {
			assert.Positive(t, s.Bytes, "the encodings are counted")
		}
	}

	// Events carry decoded objects.
	a1 = a1.DeepCopy()
	a1.Data["k"] = "3"
	require.NoError(t, src.Client().Update(t.Context(), a1))
	require.NoError(t, src.Client().Delete(t.Context(), configMap("b", "db", nil, nil)))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) == 4
	}, 10*time.Second, 10*time.Millisecond)
	assert.ElementsMatch(t, []string{"add 1", "add 2", "update 3", "delete db"}, events)
	got, err := narrow.Get("a", "web")
	require.NoError(t, err)
	assert.Equal(t, "3", got.Data["k"])
}

// HeldAsBytes is asked before a store starts: a store holding objects
// cannot turn to bytes.
func TestHeldAsBytesAfterStart(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	fxstoretest.Start(t, r, fxstoretest.NewSource(clientgoscheme.Scheme))
	_, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.HeldAsBytes())
	require.ErrorContains(t, err, "fxstore.HeldAsBytes(): the store has started, holding objects; ask for it before the app starts")
}

// A List by label from a store held as bytes selects on labels it keeps
// beside the encoding, and decodes only the objects selected: it returns
// what a store of decoded objects returns.
func TestHeldAsBytesListsBySelector(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	asBytes, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.HeldAsBytes())
	require.NoError(t, err)
	decoded, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "group"})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	var objs []client.Object
	for i := range 90 {
		l := map[string]string{"group": fmt.Sprint(i % 3)}
		for _, k := range []string{"app", "tier", "example.com/team"} {
			if rng.IntN(3) > 0 {
				l[k] = fmt.Sprint(rng.IntN(3))
			}
		}
		objs = append(objs, configMap(fmt.Sprint("ns-", i%3), fmt.Sprint("cm-", i), l, map[string]string{"k": fmt.Sprint(i)}))
	}
	fxstoretest.Start(t, r, fxstoretest.NewSource(clientgoscheme.Scheme, objs...))

	names := func(objs []*corev1.ConfigMap) []string {
		out := make([]string, len(objs))
		for i, o := range objs {
			out[i] = o.Namespace + "/" + o.Name + "=" + o.Data["k"]
		}
		slices.Sort(out)
		return out
	}
	for _, selector := range []string{"app=1", "app!=1", "tier in (0,2)", "tier notin (0)", "example.com/team", "!example.com/team", "app=0,tier=1", "app,!tier,group=2"} {
		sel, err := labels.Parse(selector)
		require.NoError(t, err)
		for _, ns := range []string{"", "ns-1"} {
			want, err := decoded.List(client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel})
			require.NoError(t, err)
			got, err := asBytes.List(client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel})
			require.NoError(t, err)
			assert.Equal(t, names(want), names(got), "%q in %q", selector, ns)
		}
	}

	// A few objects of 90 selected: a few decodes' allocations, not 90.
	one := client.MatchingLabels(objs[0].GetLabels())
	selected, err := asBytes.List(one)
	require.NoError(t, err)
	require.NotEmpty(t, selected)
	all := testing.AllocsPerRun(10, func() { _, _ = asBytes.List() })
	few := testing.AllocsPerRun(10, func() { _, _ = asBytes.List(one) })
	t.Logf("allocations: %.0f to list all 90, %.0f to list the %d selected", all, few, len(selected))
	assert.Less(t, few, all/10)
}

package fxstore_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

// informers returns how many of r's stores run an informer, and the views
// by key: the store each is served from.
func informers(r *fxstore.Registry) (int, map[string]string) {
	n, views := 0, map[string]string{}
	for _, s := range r.Stores() {
		if s.ViewOf == nil {
			n++
			continue
		}
		views[s.Key.String()] = s.ViewOf.String()
	}
	return n, views
}

func sortedNames[T client.Object](objs []T) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.GetNamespace() + "/" + o.GetName()
	}
	slices.Sort(out)
	return out
}

// Stores whose objects are a subset of a broader store's are served from
// it: one informer for all ConfigMaps, front and back and one namespace's
// as views, chains collapsed; reads see only each view's objects.
func TestNarrowStoresAreViewsOfTheBroadest(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	front, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "tier=front"})
	require.NoError(t, err)
	frontWeb, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "tier=front,app=web"},
		fxstore.WithIndex("app", byApp))
	require.NoError(t, err)
	inA, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a"})
	require.NoError(t, err)
	named, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{FieldSelector: "metadata.name=x"})
	require.NoError(t, err)
	all, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	own, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "tier=back"}, fxstore.WithOwnInformer())
	require.NoError(t, err)

	src := fxstoretest.NewSource(clientgoscheme.Scheme,
		testenv.ConfigMap("a", "x", testenv.Labels{"tier": "front", "app": "web"}),
		testenv.ConfigMap("a", "y", testenv.Labels{"tier": "back"}),
		testenv.ConfigMap("b", "x", testenv.Labels{"tier": "front", "app": "db"}),
		testenv.ConfigMap("b", "z"),
	)
	fxstoretest.Start(t, r, src)

	n, views := informers(r)
	assert.Equal(t, 2, n, "all ConfigMaps, and tier=back, which asked for its own")
	assert.Equal(t, map[string]string{
		front.Key().String():    all.Key().String(),
		frontWeb.Key().String(): all.Key().String(),
		inA.Key().String():      all.Key().String(),
		named.Key().String():    all.Key().String(),
	}, views, "chains collapse: tier=front,app=web is a view of all, not of tier=front")

	for _, tt := range []struct {
		store *fxstore.Store[*corev1.ConfigMap]
		want  []string
	}{
		{all, []string{"a/x", "a/y", "b/x", "b/z"}},
		{front, []string{"a/x", "b/x"}},
		{frontWeb, []string{"a/x"}},
		{inA, []string{"a/x", "a/y"}},
		{named, []string{"a/x", "b/x"}},
		{own, []string{"a/y"}},
	} {
		t.Run(tt.store.String(), func(t *testing.T) {
			require.True(t, tt.store.HasSynced())
			list, err := tt.store.List()
			require.NoError(t, err)
			assert.Equal(t, tt.want, sortedNames(list))
			count, err := tt.store.Count()
			require.NoError(t, err)
			assert.Equal(t, len(tt.want), count)
			inB, err := tt.store.List(client.InNamespace("b"))
			require.NoError(t, err)
			assert.Equal(t, slices.DeleteFunc(slices.Clone(tt.want), func(n string) bool { return n[0] != 'b' }), sortedNames(inB))
			for _, key := range []string{"a/x", "a/y", "b/x", "b/z"} {
				_, err := tt.store.Get(key[:1], key[2:])
				if slices.Contains(tt.want, key) {
					assert.NoError(t, err, key)
				} else {
					assert.True(t, apierrors.IsNotFound(err), "%s: %v", key, err)
				}
			}
			informed := tt.store.Informer().GetIndexer().ListKeys()
			slices.Sort(informed)
			assert.Equal(t, tt.want, informed, "the informer given out holds the same")
		})
	}

	byIndex, err := frontWeb.ByIndex("app", "web")
	require.NoError(t, err)
	assert.Equal(t, []string{"a/x"}, sortedNames(byIndex), "an index declared on a view works, on the view's objects")
	_, err = all.ByIndex("app", "db")
	require.ErrorContains(t, err, "Index with name app does not exist", "the view's index is on its parent's informer, but not the parent's to read")

	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = front.Get("a", "x") }), "Get on a view allocates nothing")
}

// updateConfigMap changes the ConfigMap namespace/name through c.
func updateConfigMap(t *testing.T, c client.Client, namespace, name string, change func(*corev1.ConfigMap)) {
	t.Helper()
	var cm corev1.ConfigMap
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, &cm))
	change(&cm)
	require.NoError(t, c.Update(t.Context(), &cm))
}

type recorded struct {
	mu     sync.Mutex
	events []string
}

func (r *recorded) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorded) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// A view's subscribers get the events a watch of its own spec would send:
// an object relabelled into the view is added, out of it deleted, with its
// last matching state.
func TestViewSubscribersSeeWhatTheirSpecSelects(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	front, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "tier=front"})
	require.NoError(t, err)
	_, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	src := fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("a", "x", testenv.Labels{"tier": "front"}))
	fxstoretest.Start(t, r, src)
	_, views := informers(r)
	require.Contains(t, views, front.Key().String())

	var got recorded
	sub, err := front.Subscribe(fxstore.HandlerFuncs[*corev1.ConfigMap]{
		AddFunc:    func(cm *corev1.ConfigMap, _ bool) { got.add("add " + cm.Name + " " + cm.Labels["tier"]) },
		UpdateFunc: func(_, cm *corev1.ConfigMap) { got.add("update " + cm.Name + " " + cm.Data["v"]) },
		DeleteFunc: func(cm *corev1.ConfigMap) { got.add("delete " + cm.Name + " " + cm.Labels["tier"]) },
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, sub.WaitForSync(t.Context()))

	ctx := context.Background()
	c := src.Client()
	update := func(name string, change func(*corev1.ConfigMap)) { updateConfigMap(t, c, "a", name, change) }
	require.NoError(t, c.Create(ctx, testenv.ConfigMap("a", "outside", testenv.Labels{"tier": "back"})))
	update("x", func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"v": "2"} })
	update("outside", func(cm *corev1.ConfigMap) { cm.Labels["tier"] = "front" })
	update("x", func(cm *corev1.ConfigMap) { cm.Labels["tier"] = "back" })
	require.NoError(t, c.Delete(ctx, testenv.ConfigMap("a", "outside")))

	want := []string{"add x front", "update x 2", "add outside front", "delete x front", "delete outside front"}
	eventually(t, func() bool { return len(got.get()) >= len(want) })
	assert.Equal(t, want, got.get())
}

// A store subscribed to before the registry starts keeps an informer of its
// own: its handlers cannot move to another's.
func TestSubscribedBeforeStartKeepsItsInformer(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	front, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "tier=front"})
	require.NoError(t, err)
	_, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	sub, err := front.Subscribe(cache.ResourceEventHandlerFuncs{})
	require.NoError(t, err)
	fxstoretest.Start(t, r, fxstoretest.NewSource(clientgoscheme.Scheme))
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	n, views := informers(r)
	assert.Equal(t, 2, n)
	assert.Empty(t, views)
}

// A store first requested after start is a view too, when a running store
// covers it.
func TestLateStoresBecomeViews(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	src := fxstoretest.NewSource(clientgoscheme.Scheme,
		testenv.ConfigMap("a", "x", testenv.Labels{"tier": "front"}),
		testenv.ConfigMap("a", "y"))
	fxstoretest.Start(t, r, src)
	require.NoError(t, r.WaitForSync(t.Context()))

	front, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "tier=front"})
	require.NoError(t, err)
	require.NoError(t, r.WaitForStore(t.Context(), front.Key()))
	n, views := informers(r)
	assert.Equal(t, 1, n)
	assert.Equal(t, map[string]string{front.Key().String(): "ConfigMap/v1 (all namespaces)"}, views)
	list, err := front.List()
	require.NoError(t, err)
	assert.Equal(t, []string{"a/x"}, sortedNames(list))
	assert.True(t, r.Stores()[1].Late)
}

func byAppMeta(m *metav1.PartialObjectMetadata) []string { return []string{m.Labels["app"]} }

// A metadata-only store is a view of a typed store of its kind: it holds no
// copy, and reads, indexes, the informer given out and events give
// PartialObjectMetadata, equal to what a metadata-only informer of its own
// holds.
func TestMetadataOnlyStoresAreViewsOfTyped(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	all, err := fxstore.For[*metav1.PartialObjectMetadata](r, fxstore.Spec{Kind: configMapKind, Namespace: "a"})
	require.NoError(t, err)
	ownAll, err := fxstore.For[*metav1.PartialObjectMetadata](r, fxstore.Spec{Kind: configMapKind, Namespace: "a", LabelSelector: "!nothing"},
		fxstore.WithOwnInformer())
	require.NoError(t, err)

	src := fxstoretest.NewSource(clientgoscheme.Scheme,
		testenv.ConfigMap("a", "x", testenv.Labels{"tier": "front", "app": "web"}, testenv.Data{"big": "data"}),
		testenv.ConfigMap("a", "y", testenv.Labels{"tier": "back"}),
		testenv.ConfigMap("b", "x", testenv.Labels{"tier": "front", "app": "db"}),
	)
	fxstoretest.Start(t, r, src)
	n, views := informers(r)
	assert.Equal(t, 2, n, "the typed store, and the one asking for its own")
	assert.Equal(t, map[string]string{all.Key().String(): "ConfigMap/v1 (all namespaces)"}, views)

	got, err := all.Get("a", "x")
	require.NoError(t, err)
	want, err := ownAll.Get("a", "x")
	require.NoError(t, err)
	assert.Equal(t, want, got, "the same object a metadata-only informer holds")
	assert.Equal(t, configMapKind, got.GroupVersionKind())
	_, err = all.Get("b", "x")
	assert.True(t, apierrors.IsNotFound(err), "outside the view: %v", err)

	list, err := all.List()
	require.NoError(t, err)
	assert.Equal(t, []string{"a/x", "a/y"}, sortedNames(list))
	informed := all.Informer().GetIndexer().List()
	require.Len(t, informed, 2)
	for _, o := range informed {
		assert.IsType(t, &metav1.PartialObjectMetadata{}, o, "the informer given out holds metadata too")
	}
	assert.Equal(t, testing.AllocsPerRun(100, func() { _, _ = ownAll.List() })+1, testing.AllocsPerRun(100, func() { _, _ = all.List() }),
		"a List makes its objects in one allocation")
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _, _ = all.Get("a", "x") }), "a Get makes the one object it returns")
}

// An index declared on a metadata-only view takes metadata, not the typed
// objects of the store it is served from; subscribers get metadata events
// with a relabelled object added and deleted as for any view.
func TestMetadataOnlyViewIndexesAndEvents(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	typed, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.WithIndex("app", byApp))
	require.NoError(t, err)
	front, err := fxstore.For[*metav1.PartialObjectMetadata](r, fxstore.Spec{Kind: configMapKind, LabelSelector: "tier=front"},
		fxstore.WithIndex("app", byAppMeta))
	require.NoError(t, err)
	src := fxstoretest.NewSource(clientgoscheme.Scheme,
		testenv.ConfigMap("a", "x", testenv.Labels{"tier": "front", "app": "web"}),
		testenv.ConfigMap("a", "y", testenv.Labels{"tier": "back", "app": "web"}))
	fxstoretest.Start(t, r, src)
	_, views := informers(r)
	require.Contains(t, views, front.Key().String(), "an index of the same name on the typed store does not stand in the way")

	web, err := front.ByIndex("app", "web")
	require.NoError(t, err)
	assert.Equal(t, []string{"a/x"}, sortedNames(web))
	typedWeb, err := typed.ByIndex("app", "web")
	require.NoError(t, err)
	assert.Equal(t, []string{"a/x", "a/y"}, sortedNames(typedWeb), "the typed store's own index is untouched")
	assert.Contains(t, front.Informer().GetIndexer().GetIndexers(), "app")

	var got recorded
	sub, err := front.Subscribe(fxstore.HandlerFuncs[*metav1.PartialObjectMetadata]{
		AddFunc:    func(m *metav1.PartialObjectMetadata, _ bool) { got.add("add " + m.Name + " " + m.Kind) },
		UpdateFunc: func(_, m *metav1.PartialObjectMetadata) { got.add("update " + m.Name + " " + m.Annotations["v"]) },
		DeleteFunc: func(m *metav1.PartialObjectMetadata) { got.add("delete " + m.Name + " " + m.Labels["tier"]) },
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, sub.WaitForSync(t.Context()))

	ctx := context.Background()
	c := src.Client()
	update := func(name string, change func(*corev1.ConfigMap)) { updateConfigMap(t, c, "a", name, change) }
	update("x", func(cm *corev1.ConfigMap) { cm.Annotations = map[string]string{"v": "2"} })
	update("y", func(cm *corev1.ConfigMap) { cm.Labels["tier"] = "front" })
	update("x", func(cm *corev1.ConfigMap) { cm.Labels["tier"] = "back" })
	require.NoError(t, c.Delete(ctx, testenv.ConfigMap("a", "y")))

	want := []string{"add x ConfigMap", "update x 2", "add y ConfigMap", "delete x front", "delete y front"}
	eventually(t, func() bool { return len(got.get()) >= len(want) })
	assert.Equal(t, want, got.get())
}

// A view that selects by namespace only, or nothing but a projection of
// its broader store's objects, adds no index to that store: it reads the
// store's own namespace index, and reads and follows changes as any view.
func TestViewsByNamespaceOnlyAddNoIndex(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	web, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "app=web"})
	require.NoError(t, err)
	webInA, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a", LabelSelector: "app=web"})
	require.NoError(t, err)
	frontInA, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a", LabelSelector: "app=web,tier=front"})
	require.NoError(t, err)
	webMeta, err := fxstore.For[*metav1.PartialObjectMetadata](r, fxstore.Spec{Kind: configMapKind, LabelSelector: "app==web"})
	require.NoError(t, err)
	webMetaInB, err := fxstore.For[*metav1.PartialObjectMetadata](r, fxstore.Spec{Kind: configMapKind, Namespace: "b", LabelSelector: "app in (web)"})
	require.NoError(t, err)

	src := fxstoretest.NewSource(clientgoscheme.Scheme,
		testenv.ConfigMap("a", "x", testenv.Labels{"app": "web", "tier": "front"}),
		testenv.ConfigMap("a", "y", testenv.Labels{"app": "web"}),
		testenv.ConfigMap("b", "x", testenv.Labels{"app": "web"}),
		testenv.ConfigMap("b", "y", testenv.Labels{"app": "db"}),
		testenv.ConfigMap("c", "z", testenv.Labels{"app": "web"}),
	)
	fxstoretest.Start(t, r, src)
	n, views := informers(r)
	require.Equal(t, 1, n)
	require.Len(t, views, 4)
	var viewIndexes []string
	for name := range web.Informer().GetIndexer().GetIndexers() {
		if strings.HasPrefix(name, "fxstore view ") {
			viewIndexes = append(viewIndexes, name)
		}
	}
	assert.Equal(t, []string{"fxstore view " + frontInA.Key().String()}, viewIndexes, "only the view selecting by labels is indexed")

	type reads struct{ all, inA, inB, informed, informedInA []string }
	read := func(list func(...client.ListOption) ([]string, error), informer cache.SharedIndexInformer) reads {
		var got reads
		var err error
		got.all, err = list()
		require.NoError(t, err)
		got.inA, err = list(client.InNamespace("a"))
		require.NoError(t, err)
		got.inB, err = list(client.InNamespace("b"))
		require.NoError(t, err)
		got.informed = informer.GetIndexer().ListKeys()
		slices.Sort(got.informed)
		got.informedInA, err = informer.GetIndexer().IndexKeys(cache.NamespaceIndex, "a")
		require.NoError(t, err)
		slices.Sort(got.informedInA)
		return got
	}
	lister := func(s *fxstore.Store[*corev1.ConfigMap]) func(...client.ListOption) ([]string, error) {
		return func(opts ...client.ListOption) ([]string, error) {
			objs, err := s.List(opts...)
			return sortedNames(objs), err
		}
	}
	metaLister := func(s *fxstore.Store[*metav1.PartialObjectMetadata]) func(...client.ListOption) ([]string, error) {
		return func(opts ...client.ListOption) ([]string, error) {
			objs, err := s.List(opts...)
			return sortedNames(objs), err
		}
	}
	check := func(t *testing.T, want map[string]reads) {
		t.Helper()
		assert.Equal(t, want[webInA.String()], read(lister(webInA), webInA.Informer()), webInA.String())
		assert.Equal(t, want[frontInA.String()], read(lister(frontInA), frontInA.Informer()), frontInA.String())
		assert.Equal(t, want[webMeta.String()], read(metaLister(webMeta), webMeta.Informer()), webMeta.String())
		assert.Equal(t, want[webMetaInB.String()], read(metaLister(webMetaInB), webMetaInB.Informer()), webMetaInB.String())
	}
	none := []string{}
	check(t, map[string]reads{
		webInA.String():     {[]string{"a/x", "a/y"}, []string{"a/x", "a/y"}, none, []string{"a/x", "a/y"}, []string{"a/x", "a/y"}},
		frontInA.String():   {[]string{"a/x"}, []string{"a/x"}, none, []string{"a/x"}, []string{"a/x"}},
		webMeta.String():    {[]string{"a/x", "a/y", "b/x", "c/z"}, []string{"a/x", "a/y"}, []string{"b/x"}, []string{"a/x", "a/y", "b/x", "c/z"}, []string{"a/x", "a/y"}},
		webMetaInB.String(): {[]string{"b/x"}, none, []string{"b/x"}, []string{"b/x"}, none},
	})
	count, err := webMeta.Count()
	require.NoError(t, err)
	assert.Equal(t, 4, count)
	list, err := webMeta.List()
	require.NoError(t, err)
	for _, m := range list {
		assert.Equal(t, configMapKind, m.GroupVersionKind(), "the objects are projected")
	}

	ctx := context.Background()
	c := src.Client()
	require.NoError(t, c.Create(ctx, testenv.ConfigMap("b", "new", testenv.Labels{"app": "web"})))
	require.NoError(t, c.Delete(ctx, testenv.ConfigMap("a", "y")))
	eventually(t, func() bool {
		n, err := webMetaInB.Count()
		return err == nil && n == 2
	})
	eventually(t, func() bool {
		n, err := webInA.Count()
		return err == nil && n == 1
	})
	check(t, map[string]reads{
		webInA.String():     {[]string{"a/x"}, []string{"a/x"}, none, []string{"a/x"}, []string{"a/x"}},
		frontInA.String():   {[]string{"a/x"}, []string{"a/x"}, none, []string{"a/x"}, []string{"a/x"}},
		webMeta.String():    {[]string{"a/x", "b/new", "b/x", "c/z"}, []string{"a/x"}, []string{"b/new", "b/x"}, []string{"a/x", "b/new", "b/x", "c/z"}, []string{"a/x"}},
		webMetaInB.String(): {[]string{"b/new", "b/x"}, none, []string{"b/new", "b/x"}, []string{"b/new", "b/x"}, none},
	})
}

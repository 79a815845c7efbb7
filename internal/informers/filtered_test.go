package informers_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/fxkube/fxkube/internal/informers"
)

func isWeb(obj any) bool { return obj.(*corev1.ConfigMap).Labels["app"] == "web" }

// viewIndex files the objects isWeb selects under their namespace and
// under AllNamespaces, as a Filter's ListIndex asks.
func viewIndex(obj any) ([]string, error) {
	if !isWeb(obj) {
		return nil, nil
	}
	return []string{obj.(*corev1.ConfigMap).Namespace, informers.AllNamespaces}, nil
}

// metaOnly projects ConfigMaps to their metadata, as a metadata-only
// store holds them.
type metaOnly struct{}

func (p metaOnly) One(obj any) any {
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		return cache.DeletedFinalStateUnknown{Key: o.Key, Obj: p.One(o.Obj)}
	case *corev1.ConfigMap:
		return &metav1.PartialObjectMetadata{ObjectMeta: *o.ObjectMeta.DeepCopy()}
	default:
		return obj
	}
}

func (p metaOnly) All(items []any) []any {
	for i, item := range items {
		items[i] = p.One(item)
	}
	return items
}

// parentOp is an event of a parent informer's; it returns once the parent
// has sent it to its handlers.
type parentOp func(t *testing.T, p *fakeInformer)

func parentAdd(obj *corev1.ConfigMap) parentOp {
	return func(t *testing.T, p *fakeInformer) {
		p.change(t, func(s *fcache.FakeControllerSource) { s.Add(obj) })
	}
}

func parentModify(obj *corev1.ConfigMap) parentOp {
	return func(t *testing.T, p *fakeInformer) {
		p.change(t, func(s *fcache.FakeControllerSource) { s.Modify(obj) })
	}
}

func parentDelete(obj *corev1.ConfigMap) parentOp {
	return func(t *testing.T, p *fakeInformer) {
		p.change(t, func(s *fcache.FakeControllerSource) { s.Delete(obj) })
	}
}

// parentTombstones makes the parent miss the deletion of objs and find
// out on a relist, so that it sends a tombstone of each.
func parentTombstones(objs ...*corev1.ConfigMap) parentOp {
	return func(t *testing.T, p *fakeInformer) { p.dropAndRelist(t, objs...) }
}

func TestFilteredEvents(t *testing.T) {
	tests := []struct {
		name    string
		objects []*corev1.ConfigMap // the parent's before the handler is added
		give    []parentOp          // the parent's events after
		project bool
		want    []string // the filtered handler's events
	}{
		{
			name:    "the initial list is the matching objects",
			objects: []*corev1.ConfigMap{configMap("ns", "a", "web", "1"), configMap("ns", "b", "db", "1")},
			want:    []string{"add ns/a v=1 initial=true"},
		},
		{
			name: "add of a matching object is an add; of another, nothing",
			give: []parentOp{parentAdd(configMap("ns", "a", "web", "1")), parentAdd(configMap("ns", "b", "db", "1"))},
			want: []string{"add ns/a v=1 initial=false"},
		},
		{
			name:    "update from matching to matching is an update",
			objects: []*corev1.ConfigMap{configMap("ns", "a", "web", "1")},
			give:    []parentOp{parentModify(configMap("ns", "a", "web", "2"))},
			want:    []string{"add ns/a v=1 initial=true", "update ns/a v=1 -> ns/a v=2"},
		},
		{
			name:    "update from not matching to matching is an add, not in the initial list",
			objects: []*corev1.ConfigMap{configMap("ns", "a", "db", "1")},
			give:    []parentOp{parentModify(configMap("ns", "a", "web", "2"))},
			want:    []string{"add ns/a v=2 initial=false"},
		},
		{
			name:    "update from matching to not matching is a delete of the old object",
			objects: []*corev1.ConfigMap{configMap("ns", "a", "web", "1")},
			give:    []parentOp{parentModify(configMap("ns", "a", "db", "2"))},
			want:    []string{"add ns/a v=1 initial=true", "delete ns/a v=1"},
		},
		{
			name:    "update of an object matching neither before nor after is nothing",
			objects: []*corev1.ConfigMap{configMap("ns", "a", "db", "1")},
			give:    []parentOp{parentModify(configMap("ns", "a", "db", "2"))},
		},
		{
			name:    "delete of a matching object is a delete; of another, nothing",
			objects: []*corev1.ConfigMap{configMap("ns", "a", "web", "1"), configMap("ns", "b", "db", "1")},
			give:    []parentOp{parentDelete(configMap("ns", "a", "web", "1")), parentDelete(configMap("ns", "b", "db", "1"))},
			want:    []string{"add ns/a v=1 initial=true", "delete ns/a v=1"},
		},
		{
			name:    "a tombstone of a matching object is passed on; of another, not",
			objects: []*corev1.ConfigMap{configMap("ns", "a", "web", "1"), configMap("ns", "b", "db", "1")},
			give:    []parentOp{parentTombstones(configMap("ns", "a", "web", "1"), configMap("ns", "b", "db", "1"))},
			want:    []string{"add ns/a v=1 initial=true", "delete tombstone ns/a of ns/a v=1"},
		},
		{
			name:    "projected, every kind of event",
			objects: []*corev1.ConfigMap{configMap("ns", "a", "web", "1"), configMap("ns", "b", "db", "1"), configMap("ns", "c", "web", "1")},
			give: []parentOp{
				parentModify(configMap("ns", "a", "web", "2")),
				parentModify(configMap("ns", "b", "web", "2")),
				parentModify(configMap("ns", "a", "db", "3")),
				parentDelete(configMap("ns", "b", "web", "2")),
				parentTombstones(configMap("ns", "c", "web", "1")),
			},
			project: true,
			want: []string{
				"add meta ns/a v=1 initial=true",
				"add meta ns/c v=1 initial=true",
				"update meta ns/a v=1 -> meta ns/a v=2",
				"add meta ns/b v=2 initial=false",
				"delete meta ns/a v=2",
				"delete meta ns/b v=2",
				"delete tombstone ns/c of meta ns/c v=1",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // a relist takes the reflector's backoff, about a second
			p := newFakeInformer(t, nil, tt.objects...)
			p.start(t)
			f := informers.Filter{Name: "test view", Parent: "test parent", Match: isWeb}
			if tt.project {
				f.Project = metaOnly{}
			}
			h := &recorder{}
			_, err := informers.NewFiltered(p, f).AddEventHandler(h)
			require.NoError(t, err)
			// The initial list reaches the handler in the parent's list
			// order; wait for it before the events that follow.
			initial := 0
			for _, obj := range tt.objects {
				if isWeb(obj) {
					initial++
				}
			}
			h.waitLen(t, initial)

			for _, op := range tt.give {
				op(t, p)
			}
			// A last matching add: once it is in, every event before it is.
			parentAdd(configMap("ns", "marker", "web", "1"))(t, p)
			marker := "add ns/marker v=1 initial=false"
			if tt.project {
				marker = "add meta ns/marker v=1 initial=false"
			}
			got := h.waitFor(t, marker)
			want := append(append([]string{}, tt.want...), marker)
			require.ElementsMatch(t, want[:initial], got[:min(initial, len(got))], "the initial list, in any order")
			require.Equal(t, want[initial:], got[initial:], "the events after it, in order")
		})
	}
}

// inNamespacer is what reads a filtered indexer's objects in a namespace.
type inNamespacer interface{ InNamespace(namespace string) []any }

func TestFilteredReads(t *testing.T) {
	p := newFakeInformer(t, cache.Indexers{"view": viewIndex, "byApp": byApp},
		configMap("ns1", "web1", "web", "1"),
		configMap("ns1", "db1", "db", "1"),
		configMap("ns2", "web2", "web", "1"),
		configMap("ns2", "db2", "db", "1"),
	)
	p.start(t)
	indexNames := map[string]string{"app": "byApp"}

	// reads are every read the tests below check, each described as a
	// sorted list; "absent" is a Get or GetByKey that finds nothing.
	reads := map[string]func(t *testing.T, ix cache.Indexer) []string{
		"List":     func(_ *testing.T, ix cache.Indexer) []string { return describeAll(ix.List()) },
		"ListKeys": func(_ *testing.T, ix cache.Indexer) []string { return sorted(ix.ListKeys()) },
		"InNamespace(ns1)": func(t *testing.T, ix cache.Indexer) []string {
			n, ok := ix.(inNamespacer)
			require.True(t, ok, "%T has no InNamespace", ix)
			return describeAll(n.InNamespace("ns1"))
		},
		"InNamespace(ns2)": func(_ *testing.T, ix cache.Indexer) []string {
			return describeAll(ix.(inNamespacer).InNamespace("ns2"))
		},
		"InNamespace()": func(_ *testing.T, ix cache.Indexer) []string {
			return describeAll(ix.(inNamespacer).InNamespace(""))
		},
		"ByIndex(namespace, ns2)": func(t *testing.T, ix cache.Indexer) []string {
			items, err := ix.ByIndex(cache.NamespaceIndex, "ns2")
			require.NoError(t, err)
			return describeAll(items)
		},
		"ByIndex(app, web)": func(t *testing.T, ix cache.Indexer) []string {
			items, err := ix.ByIndex("app", "web")
			require.NoError(t, err)
			return describeAll(items)
		},
		"ByIndex(app, db)": func(t *testing.T, ix cache.Indexer) []string {
			items, err := ix.ByIndex("app", "db")
			require.NoError(t, err)
			return describeAll(items)
		},
		"IndexKeys(app, web)": func(t *testing.T, ix cache.Indexer) []string {
			keys, err := ix.IndexKeys("app", "web")
			require.NoError(t, err)
			return sorted(keys)
		},
		"Index(namespace, an object in ns1)": func(t *testing.T, ix cache.Indexer) []string {
			items, err := ix.Index(cache.NamespaceIndex, configMap("ns1", "other", "", ""))
			require.NoError(t, err)
			return describeAll(items)
		},
		"GetByKey(ns1/web1)": func(t *testing.T, ix cache.Indexer) []string { return found(t)(ix.GetByKey("ns1/web1")) },
		"GetByKey(ns1/db1)":  func(t *testing.T, ix cache.Indexer) []string { return found(t)(ix.GetByKey("ns1/db1")) },
		"GetByKey(ns2/web2)": func(t *testing.T, ix cache.Indexer) []string { return found(t)(ix.GetByKey("ns2/web2")) },
		"GetByKey(ns3/x)":    func(t *testing.T, ix cache.Indexer) []string { return found(t)(ix.GetByKey("ns3/x")) },
		"Get(ns2/db2)": func(t *testing.T, ix cache.Indexer) []string {
			return found(t)(ix.Get(configMap("ns2", "db2", "", "")))
		},
	}

	tests := []struct {
		name string
		give informers.Filter
		want map[string][]string // for each of reads
	}{
		{
			name: "a list index",
			give: informers.Filter{Match: isWeb, ListIndex: "view"},
			want: map[string][]string{
				"List":                               {"ns1/web1 v=1", "ns2/web2 v=1"},
				"ListKeys":                           {"ns1/web1", "ns2/web2"},
				"InNamespace(ns1)":                   {"ns1/web1 v=1"},
				"InNamespace(ns2)":                   {"ns2/web2 v=1"},
				"InNamespace()":                      {"ns1/web1 v=1", "ns2/web2 v=1"},
				"ByIndex(namespace, ns2)":            {"ns2/web2 v=1"},
				"ByIndex(app, web)":                  {"ns1/web1 v=1", "ns2/web2 v=1"},
				"ByIndex(app, db)":                   {},
				"IndexKeys(app, web)":                {"ns1/web1", "ns2/web2"},
				"Index(namespace, an object in ns1)": {"ns1/web1 v=1"},
				"GetByKey(ns1/web1)":                 {"ns1/web1 v=1"},
				"GetByKey(ns1/db1)":                  {"absent"},
				"GetByKey(ns2/web2)":                 {"ns2/web2 v=1"},
				"GetByKey(ns3/x)":                    {"absent"},
				"Get(ns2/db2)":                       {"absent"},
			},
		},
		{
			name: "a list index, projected",
			give: informers.Filter{Match: isWeb, ListIndex: "view", Project: metaOnly{}},
			want: map[string][]string{
				"List":                               {"meta ns1/web1 v=1", "meta ns2/web2 v=1"},
				"ListKeys":                           {"ns1/web1", "ns2/web2"},
				"InNamespace(ns1)":                   {"meta ns1/web1 v=1"},
				"InNamespace(ns2)":                   {"meta ns2/web2 v=1"},
				"InNamespace()":                      {"meta ns1/web1 v=1", "meta ns2/web2 v=1"},
				"ByIndex(namespace, ns2)":            {"meta ns2/web2 v=1"},
				"ByIndex(app, web)":                  {"meta ns1/web1 v=1", "meta ns2/web2 v=1"},
				"ByIndex(app, db)":                   {},
				"IndexKeys(app, web)":                {"ns1/web1", "ns2/web2"},
				"Index(namespace, an object in ns1)": {"meta ns1/web1 v=1"},
				"GetByKey(ns1/web1)":                 {"meta ns1/web1 v=1"},
				"GetByKey(ns1/db1)":                  {"absent"},
				"GetByKey(ns2/web2)":                 {"meta ns2/web2 v=1"},
				"GetByKey(ns3/x)":                    {"absent"},
				"Get(ns2/db2)":                       {"absent"},
			},
		},
		{
			name: "one namespace",
			give: informers.Filter{
				Match:     func(obj any) bool { return obj.(*corev1.ConfigMap).Namespace == "ns1" },
				Namespace: "ns1",
			},
			want: map[string][]string{
				"List":                               {"ns1/db1 v=1", "ns1/web1 v=1"},
				"ListKeys":                           {"ns1/db1", "ns1/web1"},
				"InNamespace(ns1)":                   {"ns1/db1 v=1", "ns1/web1 v=1"},
				"InNamespace(ns2)":                   {},
				"InNamespace()":                      {"ns1/db1 v=1", "ns1/web1 v=1"},
				"ByIndex(namespace, ns2)":            {},
				"ByIndex(app, web)":                  {"ns1/web1 v=1"},
				"ByIndex(app, db)":                   {"ns1/db1 v=1"},
				"IndexKeys(app, web)":                {"ns1/web1"},
				"Index(namespace, an object in ns1)": {"ns1/db1 v=1", "ns1/web1 v=1"},
				"GetByKey(ns1/web1)":                 {"ns1/web1 v=1"},
				"GetByKey(ns1/db1)":                  {"ns1/db1 v=1"},
				"GetByKey(ns2/web2)":                 {"absent"},
				"GetByKey(ns3/x)":                    {"absent"},
				"Get(ns2/db2)":                       {"absent"},
			},
		},
		{
			name: "all namespaces",
			give: informers.Filter{Match: func(any) bool { return true }},
			want: map[string][]string{
				"List":                               {"ns1/db1 v=1", "ns1/web1 v=1", "ns2/db2 v=1", "ns2/web2 v=1"},
				"ListKeys":                           {"ns1/db1", "ns1/web1", "ns2/db2", "ns2/web2"},
				"InNamespace(ns1)":                   {"ns1/db1 v=1", "ns1/web1 v=1"},
				"InNamespace(ns2)":                   {"ns2/db2 v=1", "ns2/web2 v=1"},
				"InNamespace()":                      {"ns1/db1 v=1", "ns1/web1 v=1", "ns2/db2 v=1", "ns2/web2 v=1"},
				"ByIndex(namespace, ns2)":            {"ns2/db2 v=1", "ns2/web2 v=1"},
				"ByIndex(app, web)":                  {"ns1/web1 v=1", "ns2/web2 v=1"},
				"ByIndex(app, db)":                   {"ns1/db1 v=1", "ns2/db2 v=1"},
				"IndexKeys(app, web)":                {"ns1/web1", "ns2/web2"},
				"Index(namespace, an object in ns1)": {"ns1/db1 v=1", "ns1/web1 v=1"},
				"GetByKey(ns1/web1)":                 {"ns1/web1 v=1"},
				"GetByKey(ns1/db1)":                  {"ns1/db1 v=1"},
				"GetByKey(ns2/web2)":                 {"ns2/web2 v=1"},
				"GetByKey(ns3/x)":                    {"absent"},
				"Get(ns2/db2)":                       {"ns2/db2 v=1"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Len(t, tt.want, len(reads), "want an answer for every read")
			f := informers.NewFiltered(p, tt.give)
			f.SetIndexes(indexNames, cache.Indexers{"app": byApp})
			ix := f.GetIndexer()
			for name, read := range reads {
				want, ok := tt.want[name]
				require.True(t, ok, "no want for %s", name)
				require.Equal(t, want, read(t, ix), name)
			}
		})
	}
}

// found describes what a Get or GetByKey found, or "absent".
func found(t *testing.T) func(item any, exists bool, err error) []string {
	return func(item any, exists bool, err error) []string {
		require.NoError(t, err)
		if !exists {
			return []string{"absent"}
		}
		return []string{describe(item)}
	}
}

func TestFilteredIndexerRest(t *testing.T) {
	p := newFakeInformer(t, cache.Indexers{"view": viewIndex, "byApp": byApp}, configMap("ns1", "web1", "web", "1"), configMap("ns2", "db1", "db", "1"))
	p.start(t)
	parentOnly := informers.NewFiltered(p, informers.Filter{Match: isWeb, ListIndex: "view"})
	own := informers.NewFiltered(p, informers.Filter{Match: isWeb, ListIndex: "view"})
	own.SetIndexes(map[string]string{"own": "byApp"}, cache.Indexers{"own": byApp})
	obj := configMap("ns1", "web2", "web", "1")

	tests := []struct {
		name string
		read func() any
		want any
	}{
		{
			name: "ListIndexFuncValues are the parent's, under the parent's index name",
			read: func() any { return sorted(own.GetIndexer().ListIndexFuncValues("own")) },
			want: []string{"db", "web"},
		},
		{
			name: "without indexes set, they are the parent's, by the parent's names",
			read: func() any { return sorted(parentOnly.GetIndexer().ListIndexFuncValues("byApp")) },
			want: []string{"db", "web"},
		},
		{
			name: "with indexes set, an index of the parent's alone is not the filter's",
			read: func() any { _, err := own.GetIndexer().ByIndex("byApp", "web"); return err.Error() },
			want: "index with name byApp does not exist",
		},
		{
			name: "GetIndexers are the parent's",
			read: func() any { return indexNames(parentOnly.GetIndexer().GetIndexers()) },
			want: []string{"byApp", cache.NamespaceIndex, "view"},
		},
		{
			name: "GetIndexers are the filter's own once set",
			read: func() any { return indexNames(own.GetIndexer().GetIndexers()) },
			want: []string{"own"},
		},
		{
			name: "the store is the indexer",
			read: func() any { return sorted(parentOnly.GetStore().ListKeys()) },
			want: []string{"ns1/web1"},
		},
		{
			name: "LastStoreSyncResourceVersion is the parent's",
			read: func() any { return parentOnly.GetIndexer().LastStoreSyncResourceVersion() },
			want: p.GetIndexer().LastStoreSyncResourceVersion(),
		},
		{name: "Add is refused", read: func() any { return parentOnly.GetIndexer().Add(obj) }, want: informers.ErrReadOnly},
		{name: "Update is refused", read: func() any { return parentOnly.GetIndexer().Update(obj) }, want: informers.ErrReadOnly},
		{name: "Delete is refused", read: func() any { return parentOnly.GetIndexer().Delete(obj) }, want: informers.ErrReadOnly},
		{
			name: "Replace is refused",
			read: func() any { return parentOnly.GetIndexer().Replace([]any{obj}, "1") },
			want: informers.ErrReadOnly,
		},
		{
			name: "AddIndexers on the indexer is refused",
			read: func() any { return parentOnly.GetIndexer().AddIndexers(cache.Indexers{"x": byApp}) },
			want: informers.ErrReadOnly,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.read())
		})
	}
	require.Equal(t, []string{"ns1/web1", "ns2/db1"}, sorted(p.GetIndexer().ListKeys()), "the writes reached the parent")
}

func TestFilteredInformer(t *testing.T) {
	p := newFakeInformer(t, nil, configMap("ns", "a", "web", "1"))
	f := informers.NewFiltered(p, informers.Filter{Name: "test view", Parent: "test parent", Match: isWeb})
	require.False(t, f.HasSynced(), "the parent has not synced")
	require.False(t, cache.IsDone(f.HasSyncedChecker()))
	p.start(t)
	require.True(t, f.HasSynced())
	require.True(t, cache.IsDone(f.HasSyncedChecker()))
	require.Equal(t, p.LastSyncResourceVersion(), f.LastSyncResourceVersion())
	require.False(t, f.IsStopped())

	require.ErrorContains(t, f.SetTransform(nil), "store test view is a view of test parent")
	require.ErrorContains(t, f.SetWatchErrorHandler(nil), "store test view is a view of test parent")
	require.ErrorContains(t, f.SetWatchErrorHandlerWithContext(nil), "store test view is a view of test parent")

	require.NoError(t, f.AddIndexers(cache.Indexers{"byApp": byApp}))
	require.Contains(t, p.GetIndexer().GetIndexers(), "byApp", "indexes are added to the parent")

	h := &recorder{}
	reg, err := f.AddEventHandler(h)
	require.NoError(t, err)
	require.Eventually(t, reg.HasSynced, wait, time.Millisecond, "the registration never synced")
	require.Equal(t, []string{"add ns/a v=1 initial=true"}, h.all())
}

func TestFilteredRemoveEventHandler(t *testing.T) {
	p := newFakeInformer(t, nil, configMap("ns", "a", "web", "1"))
	p.start(t)
	f := informers.NewFiltered(p, informers.Filter{Name: "test view", Match: isWeb})
	removed, stays := &recorder{}, &recorder{}
	reg, err := f.AddEventHandler(removed)
	require.NoError(t, err)
	_, err = f.AddEventHandler(stays)
	require.NoError(t, err)
	removed.waitLen(t, 1)
	stays.waitLen(t, 1)

	require.NoError(t, f.RemoveEventHandler(reg))
	require.NoError(t, f.RemoveEventHandler(reg), "a second removal")
	parentAdd(configMap("ns", "b", "web", "1"))(t, p)
	stays.waitFor(t, "add ns/b v=1 initial=false")
	require.Equal(t, []string{"add ns/a v=1 initial=true"}, removed.all())
}

func TestFilteredClose(t *testing.T) {
	p := newFakeInformer(t, nil, configMap("ns", "a", "web", "1"))
	p.start(t)
	closed := informers.NewFiltered(p, informers.Filter{Name: "test view", Match: isWeb})
	open := informers.NewFiltered(p, informers.Filter{Name: "other view", Match: isWeb})
	h1, h2, other := &recorder{}, &recorder{}, &recorder{}
	reg1, err := closed.AddEventHandler(h1)
	require.NoError(t, err)
	_, err = closed.AddEventHandler(h2)
	require.NoError(t, err)
	_, err = open.AddEventHandler(other)
	require.NoError(t, err)
	for _, h := range []*recorder{h1, h2, other} {
		h.waitLen(t, 1)
	}

	closed.Close()
	parentAdd(configMap("ns", "b", "web", "1"))(t, p)
	parentAdd(configMap("ns", "marker", "web", "1"))(t, p)
	other.waitFor(t, "add ns/marker v=1 initial=false")
	require.Equal(t, []string{"add ns/a v=1 initial=true"}, h1.all(), "a handler got events after Close")
	require.Equal(t, []string{"add ns/a v=1 initial=true"}, h2.all(), "a handler got events after Close")

	_, err = closed.AddEventHandler(&recorder{})
	require.ErrorContains(t, err, "store test view was dropped")
	require.NoError(t, closed.RemoveEventHandler(reg1), "removing a handler Close removed")
}

package informers_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/fxkube/fxkube/internal/informers"
)

// unionFixture is a union over members a and b (running) and c (not
// running until a step starts it), and the handlers steps add to it.
type unionFixture struct {
	union    *informers.Union[string]
	members  map[string]*fakeInformer
	handlers map[string]*recorder
	regs     map[string]cache.ResourceEventHandlerRegistration
}

func newUnionFixture(t *testing.T) *unionFixture {
	f := &unionFixture{
		union: informers.NewUnion[string]("test union"),
		members: map[string]*fakeInformer{
			"a": newFakeInformer(t, nil, configMap("a", "1", "", "1"), configMap("a", "2", "", "1")),
			"b": newFakeInformer(t, nil, configMap("b", "1", "", "1")),
			"c": newFakeInformer(t, nil, configMap("c", "1", "", "1")),
		},
		handlers: map[string]*recorder{},
		regs:     map[string]cache.ResourceEventHandlerRegistration{},
	}
	f.members["a"].start(t)
	f.members["b"].start(t)
	return f
}

type unionStep struct {
	name string
	do   func(t *testing.T, f *unionFixture)
	// want is the events each handler gets from the step, in any order
	// (members send theirs concurrently); a handler not named gets none.
	want map[string][]string
	// wantList is the union's objects after the step.
	wantList []string
	// wantSynced is whether the union and every registration have synced
	// after the step (false only while member c holds it back, as it has
	// not run).
	wantSynced bool
}

func addHandler(name string) func(*testing.T, *unionFixture) {
	return func(t *testing.T, f *unionFixture) {
		f.handlers[name] = &recorder{}
		reg, err := f.union.AddEventHandler(f.handlers[name])
		require.NoError(t, err)
		f.regs[name] = reg
	}
}

func removeHandler(name string) func(*testing.T, *unionFixture) {
	return func(t *testing.T, f *unionFixture) {
		require.NoError(t, f.union.RemoveEventHandler(f.regs[name]))
	}
}

func addMember(k string) func(*testing.T, *unionFixture) {
	return func(t *testing.T, f *unionFixture) { require.NoError(t, f.union.Add(k, f.members[k])) }
}

func removeMember(k string) func(*testing.T, *unionFixture) {
	return func(t *testing.T, f *unionFixture) { require.NoError(t, f.union.Remove(k)) }
}

func startMember(k string) func(*testing.T, *unionFixture) {
	return func(t *testing.T, f *unionFixture) { f.members[k].start(t) }
}

// change changes member k's source and waits until k has handled it.
func change(k string, do func(*fcache.FakeControllerSource)) func(*testing.T, *unionFixture) {
	return func(t *testing.T, f *unionFixture) { f.members[k].change(t, do) }
}

func TestUnionEventsAsMembersAndHandlersComeAndGo(t *testing.T) {
	tests := []struct {
		name  string
		steps []unionStep
	}{
		{
			name: "handlers added before and after members come and go",
			steps: []unionStep{
				{
					name:       "add handler 1 to an empty union",
					do:         addHandler("h1"),
					wantList:   []string{},
					wantSynced: true,
				},
				{
					name:       "add member a: handler 1 gets its objects as an initial list",
					do:         addMember("a"),
					want:       map[string][]string{"h1": {"add a/1 v=1 initial=true", "add a/2 v=1 initial=true"}},
					wantList:   []string{"a/1 v=1", "a/2 v=1"},
					wantSynced: true,
				},
				{
					name:       "add member b",
					do:         addMember("b"),
					want:       map[string][]string{"h1": {"add b/1 v=1 initial=true"}},
					wantList:   []string{"a/1 v=1", "a/2 v=1", "b/1 v=1"},
					wantSynced: true,
				},
				{
					name:       "remove member a: no deletes",
					do:         removeMember("a"),
					wantList:   []string{"b/1 v=1"},
					wantSynced: true,
				},
				{
					name:       "a change in removed member a reaches no handler",
					do:         change("a", func(s *fcache.FakeControllerSource) { s.Modify(configMap("a", "1", "", "2")) }),
					wantList:   []string{"b/1 v=1"},
					wantSynced: true,
				},
				{
					name:       "add handler 2: it gets the members' objects",
					do:         addHandler("h2"),
					want:       map[string][]string{"h2": {"add b/1 v=1 initial=true"}},
					wantList:   []string{"b/1 v=1"},
					wantSynced: true,
				},
				{
					name: "re-add member a: both handlers get its objects as they are now",
					do:   addMember("a"),
					want: map[string][]string{
						"h1": {"add a/1 v=2 initial=true", "add a/2 v=1 initial=true"},
						"h2": {"add a/1 v=2 initial=true", "add a/2 v=1 initial=true"},
					},
					wantList:   []string{"a/1 v=2", "a/2 v=1", "b/1 v=1"},
					wantSynced: true,
				},
				{
					name:       "remove handler 1",
					do:         removeHandler("h1"),
					wantList:   []string{"a/1 v=2", "a/2 v=1", "b/1 v=1"},
					wantSynced: true,
				},
				{
					name:       "update in member b reaches handler 2 only",
					do:         change("b", func(s *fcache.FakeControllerSource) { s.Modify(configMap("b", "1", "", "2")) }),
					want:       map[string][]string{"h2": {"update b/1 v=1 -> b/1 v=2"}},
					wantList:   []string{"a/1 v=2", "a/2 v=1", "b/1 v=2"},
					wantSynced: true,
				},
				{
					name:       "add in member a, not in the initial list",
					do:         change("a", func(s *fcache.FakeControllerSource) { s.Add(configMap("a", "3", "", "1")) }),
					want:       map[string][]string{"h2": {"add a/3 v=1 initial=false"}},
					wantList:   []string{"a/1 v=2", "a/2 v=1", "a/3 v=1", "b/1 v=2"},
					wantSynced: true,
				},
				{
					name:       "delete in member a",
					do:         change("a", func(s *fcache.FakeControllerSource) { s.Delete(configMap("a", "2", "", "1")) }),
					want:       map[string][]string{"h2": {"delete a/2 v=1"}},
					wantList:   []string{"a/1 v=2", "a/3 v=1", "b/1 v=2"},
					wantSynced: true,
				},
				{
					name:       "remove member b: no deletes",
					do:         removeMember("b"),
					wantList:   []string{"a/1 v=2", "a/3 v=1"},
					wantSynced: true,
				},
				{
					name:       "a later update shows no event was left behind",
					do:         change("a", func(s *fcache.FakeControllerSource) { s.Modify(configMap("a", "3", "", "2")) }),
					want:       map[string][]string{"h2": {"update a/3 v=1 -> a/3 v=2"}},
					wantList:   []string{"a/1 v=2", "a/3 v=2"},
					wantSynced: true,
				},
			},
		},
		{
			name: "a member added before it runs holds the union back until it syncs",
			steps: []unionStep{
				{
					name:       "add handler 1",
					do:         addHandler("h1"),
					wantList:   []string{},
					wantSynced: true,
				},
				{
					name:       "add member c, not running",
					do:         addMember("c"),
					wantList:   []string{},
					wantSynced: false,
				},
				{
					name:       "add handler 2 while c has not synced",
					do:         addHandler("h2"),
					wantList:   []string{},
					wantSynced: false,
				},
				{
					name: "start c: both handlers get its first list",
					do:   startMember("c"),
					want: map[string][]string{
						"h1": {"add c/1 v=1 initial=true"},
						"h2": {"add c/1 v=1 initial=true"},
					},
					wantList:   []string{"c/1 v=1"},
					wantSynced: true,
				},
				{
					name: "add member a",
					do:   addMember("a"),
					want: map[string][]string{
						"h1": {"add a/1 v=1 initial=true", "add a/2 v=1 initial=true"},
						"h2": {"add a/1 v=1 initial=true", "add a/2 v=1 initial=true"},
					},
					wantList:   []string{"a/1 v=1", "a/2 v=1", "c/1 v=1"},
					wantSynced: true,
				},
				{
					name: "a later update shows no event was left behind",
					do:   change("c", func(s *fcache.FakeControllerSource) { s.Modify(configMap("c", "1", "", "2")) }),
					want: map[string][]string{
						"h1": {"update c/1 v=1 -> c/1 v=2"},
						"h2": {"update c/1 v=1 -> c/1 v=2"},
					},
					wantList:   []string{"a/1 v=1", "a/2 v=1", "c/1 v=2"},
					wantSynced: true,
				},
			},
		},
		{
			name: "a member removed before it runs no longer holds the union back",
			steps: []unionStep{
				{
					name:       "add member c, not running",
					do:         addMember("c"),
					wantList:   []string{},
					wantSynced: false,
				},
				{
					name:       "add handler 1",
					do:         addHandler("h1"),
					wantList:   []string{},
					wantSynced: false,
				},
				{
					name:       "remove member c",
					do:         removeMember("c"),
					wantList:   []string{},
					wantSynced: true,
				},
				{
					name:       "add member b",
					do:         addMember("b"),
					want:       map[string][]string{"h1": {"add b/1 v=1 initial=true"}},
					wantList:   []string{"b/1 v=1"},
					wantSynced: true,
				},
				{
					name:       "a later update shows no event was left behind",
					do:         change("b", func(s *fcache.FakeControllerSource) { s.Modify(configMap("b", "1", "", "2")) }),
					want:       map[string][]string{"h1": {"update b/1 v=1 -> b/1 v=2"}},
					wantList:   []string{"b/1 v=2"},
					wantSynced: true,
				},
			},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newUnionFixture(t)
			seen := map[string]int{} // events of each handler checked so far
			for _, step := range tt.steps {
				step.do(t, f)
				for name, h := range f.handlers {
					want := step.want[name]
					got := h.waitLen(t, seen[name]+len(want))[seen[name]:]
					require.ElementsMatch(t, want, got, "step %q: events of handler %s", step.name, name)
					seen[name] += len(got)
				}
				require.Equal(t, step.wantList, describeAll(f.union.GetIndexer().List()), "step %q: objects", step.name)
				if !step.wantSynced {
					require.False(t, f.union.HasSynced(), "step %q: union synced", step.name)
					for name, reg := range f.regs {
						require.False(t, reg.HasSynced(), "step %q: handler %s synced", step.name, name)
					}
					continue
				}
				require.True(t, f.union.HasSynced(), "step %q: union not synced", step.name)
				for name, reg := range f.regs {
					require.Eventually(t, reg.HasSynced, wait, time.Millisecond, "step %q: handler %s not synced", step.name, name)
				}
			}
		})
	}
}

func TestUnionRegistrationHasSyncedChecker(t *testing.T) {
	tests := []struct {
		name string
		// give is what lets a handler still busy with member b's objects
		// be synced.
		give func(t *testing.T, u *informers.Union[string], reg cache.ResourceEventHandlerRegistration, h *gated)
		// wantEvents is the handler's events once synced.
		wantEvents []string
	}{
		{
			name: "the handler has had every member's objects",
			give: func(_ *testing.T, _ *informers.Union[string], _ cache.ResourceEventHandlerRegistration, h *gated) {
				h.open()
			},
			wantEvents: []string{"add a/1 v=1 initial=true", "add a/2 v=1 initial=true", "add b/1 v=1 initial=true"},
		},
		{
			name: "the member it was busy with is removed",
			give: func(t *testing.T, u *informers.Union[string], _ cache.ResourceEventHandlerRegistration, _ *gated) {
				require.NoError(t, u.Remove("b"))
			},
			wantEvents: []string{"add a/1 v=1 initial=true", "add a/2 v=1 initial=true"},
		},
		{
			name: "the handler is removed",
			give: func(t *testing.T, u *informers.Union[string], reg cache.ResourceEventHandlerRegistration, _ *gated) {
				require.NoError(t, u.RemoveEventHandler(reg))
			},
			wantEvents: []string{"add a/1 v=1 initial=true", "add a/2 v=1 initial=true"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newUnionFixture(t)
			require.NoError(t, f.union.Add("a", f.members["a"]))
			require.NoError(t, f.union.Add("b", f.members["b"]))
			h := newGated(t, func(obj any) bool { return strings.HasPrefix(describe(obj), "b/") })
			reg, err := f.union.AddEventHandler(h)
			require.NoError(t, err)
			h.waitEntered(t)
			h.waitLen(t, 2) // member a's objects

			checker := reg.HasSyncedChecker()
			require.False(t, reg.HasSynced(), "synced while busy with member b's objects")
			require.Never(t, isDone(checker), never, never/10, "checker done while busy with member b's objects")
			require.True(t, f.union.HasSynced(), "the union's members have synced; only the handler has not")

			tt.give(t, f.union, reg, h)
			require.Eventually(t, isDone(checker), wait, time.Millisecond, "checker never done")
			require.True(t, reg.HasSynced())
			require.ElementsMatch(t, tt.wantEvents, h.all())
		})
	}
}

func TestUnionHasSyncedChecker(t *testing.T) {
	tests := []struct {
		name string
		give func(t *testing.T, f *unionFixture) // what lets member c stop holding the union back
	}{
		{name: "member c syncs", give: startMember("c")},
		{name: "member c is removed", give: removeMember("c")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newUnionFixture(t)
			require.NoError(t, f.union.Add("a", f.members["a"]))
			require.NoError(t, f.union.Add("c", f.members["c"]))

			checker := f.union.HasSyncedChecker()
			require.Equal(t, "test union", checker.Name())
			require.False(t, f.union.HasSynced())
			require.Never(t, isDone(checker), never, never/10, "done before member c synced")

			tt.give(t, f)
			require.Eventually(t, isDone(checker), wait, time.Millisecond, "never done")
			require.True(t, f.union.HasSynced())
		})
	}
}

func TestUnionReads(t *testing.T) {
	// Members hold overlapping keys; member "a" holds namespaces that sort
	// after member "b"'s, so that member key order shows.
	a := newFakeInformer(t, nil, configMap("zeta", "1", "", "1"), configMap("zeta", "2", "", "1"), configMap("shared", "s", "", "a"))
	b := newFakeInformer(t, nil, configMap("alpha", "1", "", "1"), configMap("shared", "s", "", "b"))
	a.start(t)
	b.start(t)
	u := informers.NewUnion[string]("test union")
	require.NoError(t, u.Add("b", b))
	require.NoError(t, u.Add("a", a))
	ix := u.GetIndexer()

	tests := []struct {
		name    string
		read    func() (any, error)
		want    any
		wantErr string
	}{
		{
			name: "List is each member's objects in member key order",
			read: func() (any, error) { return inGroups(descriptions(ix.List()), 3, 2), nil },
			want: [][]string{{"shared/s v=a", "zeta/1 v=1", "zeta/2 v=1"}, {"alpha/1 v=1", "shared/s v=b"}},
		},
		{
			name: "the store lists as the indexer does",
			read: func() (any, error) { return inGroups(descriptions(u.GetStore().List()), 3, 2), nil },
			want: [][]string{{"shared/s v=a", "zeta/1 v=1", "zeta/2 v=1"}, {"alpha/1 v=1", "shared/s v=b"}},
		},
		{
			name: "ListKeys is each member's keys in member key order",
			read: func() (any, error) { return inGroups(ix.ListKeys(), 3, 2), nil },
			want: [][]string{{"shared/s", "zeta/1", "zeta/2"}, {"alpha/1", "shared/s"}},
		},
		{
			name: "GetByKey of a key two members hold is the first member's",
			read: func() (any, error) { return get(ix.GetByKey("shared/s")) },
			want: "shared/s v=a",
		},
		{
			name: "GetByKey of the second member's object",
			read: func() (any, error) { return get(ix.GetByKey("alpha/1")) },
			want: "alpha/1 v=1",
		},
		{
			name: "GetByKey of no member's",
			read: func() (any, error) { return get(ix.GetByKey("alpha/2")) },
			want: "not found",
		},
		{
			name: "Get",
			read: func() (any, error) { return get(ix.Get(configMap("zeta", "2", "", ""))) },
			want: "zeta/2 v=1",
		},
		{
			name: "Get of a tombstone finds its object",
			read: func() (any, error) {
				return get(ix.Get(cache.DeletedFinalStateUnknown{Key: "alpha/1", Obj: configMap("alpha", "1", "", "")}))
			},
			want: "alpha/1 v=1",
		},
		{
			name: "ByIndex gathers the members' in member key order",
			read: func() (any, error) {
				items, err := ix.ByIndex(cache.NamespaceIndex, "shared")
				return descriptions(items), err
			},
			want: []string{"shared/s v=a", "shared/s v=b"},
		},
		{
			name: "ByIndex of one member's namespace",
			read: func() (any, error) {
				items, err := ix.ByIndex(cache.NamespaceIndex, "zeta")
				return describeAll(items), err
			},
			want: []string{"zeta/1 v=1", "zeta/2 v=1"},
		},
		{
			name: "Index",
			read: func() (any, error) {
				items, err := ix.Index(cache.NamespaceIndex, configMap("alpha", "other", "", ""))
				return describeAll(items), err
			},
			want: []string{"alpha/1 v=1"},
		},
		{
			name: "IndexKeys",
			read: func() (any, error) {
				keys, err := ix.IndexKeys(cache.NamespaceIndex, "shared")
				return keys, err
			},
			want: []string{"shared/s", "shared/s"},
		},
		{
			name: "ListIndexFuncValues is the members' values, sorted, each once",
			read: func() (any, error) { return ix.ListIndexFuncValues(cache.NamespaceIndex), nil },
			want: []string{"alpha", "shared", "zeta"},
		},
		{
			name: "GetIndexers",
			read: func() (any, error) { return indexNames(ix.GetIndexers()), nil },
			want: []string{cache.NamespaceIndex},
		},
		{
			name:    "ByIndex of an index no member has",
			read:    func() (any, error) { return ix.ByIndex("nope", "x") },
			wantErr: "does not exist",
		},
		{
			name:    "IndexKeys of an index no member has",
			read:    func() (any, error) { return ix.IndexKeys("nope", "x") },
			wantErr: "does not exist",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.read()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestUnionWritesAreRefused(t *testing.T) {
	m := newFakeInformer(t, nil, configMap("a", "1", "", "1"))
	m.start(t)
	u := informers.NewUnion[string]("test union")
	require.NoError(t, u.Add("a", m))
	obj := configMap("a", "2", "", "1")

	tests := []struct {
		name  string
		write func(cache.Indexer) error
	}{
		{name: "Add", write: func(ix cache.Indexer) error { return ix.Add(obj) }},
		{name: "Update", write: func(ix cache.Indexer) error { return ix.Update(obj) }},
		{name: "Delete", write: func(ix cache.Indexer) error { return ix.Delete(obj) }},
		{name: "Replace", write: func(ix cache.Indexer) error { return ix.Replace([]any{obj}, "1") }},
		{name: "AddIndexers", write: func(ix cache.Indexer) error { return ix.AddIndexers(cache.Indexers{"x": byApp}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.write(u.GetIndexer()), informers.ErrReadOnly)
			require.Equal(t, []string{"a/1"}, u.GetIndexer().ListKeys(), "the member's objects changed")
			require.Equal(t, []string{"a/1"}, m.GetIndexer().ListKeys())
		})
	}
}

func byApp(obj any) ([]string, error) {
	return []string{obj.(*corev1.ConfigMap).Labels["app"]}, nil
}

func TestUnionAddIndexersReachesPresentAndFutureMembers(t *testing.T) {
	a := newFakeInformer(t, nil, configMap("a", "1", "web", "1"), configMap("a", "2", "db", "1"))
	b := newFakeInformer(t, nil, configMap("b", "1", "web", "1"))
	a.start(t)
	b.start(t)
	u := informers.NewUnion[string]("test union")
	require.Equal(t, []string{}, indexNames(u.GetIndexer().GetIndexers()), "an empty union has no indexes")

	require.NoError(t, u.AddIndexers(cache.Indexers{"byApp": byApp}))
	require.Equal(t, []string{"byApp"}, indexNames(u.GetIndexer().GetIndexers()), "an empty union has the indexes added to it")

	require.NoError(t, u.Add("a", a))
	require.Contains(t, a.GetIndexer().GetIndexers(), "byApp", "member added after")
	require.NoError(t, u.AddIndexers(cache.Indexers{"byName": cache.MetaNamespaceIndexFunc}))
	require.Contains(t, a.GetIndexer().GetIndexers(), "byName", "member present")
	require.NoError(t, u.Add("b", b))
	require.Contains(t, b.GetIndexer().GetIndexers(), "byApp", "member added after")
	require.Contains(t, b.GetIndexer().GetIndexers(), "byName", "member added after")

	items, err := u.GetIndexer().ByIndex("byApp", "web")
	require.NoError(t, err)
	require.Equal(t, []string{"a/1 v=1", "b/1 v=1"}, descriptions(items))
	require.Equal(t, []string{"db", "web"}, u.GetIndexer().ListIndexFuncValues("byApp"))
	require.Equal(t, []string{"byApp", "byName", cache.NamespaceIndex}, indexNames(u.GetIndexer().GetIndexers()))
}

func TestUnionReAddsMemberAfterAddIndexers(t *testing.T) {
	a := newFakeInformer(t, nil, configMap("a", "1", "web", "1"))
	a.start(t)
	u := informers.NewUnion[string]("test union")
	require.NoError(t, u.Add("a", a))
	require.NoError(t, u.AddIndexers(cache.Indexers{"byApp": byApp}))
	require.NoError(t, u.Remove("a"))

	// The member has the union's indexes already, from its first time.
	require.NoError(t, u.Add("a", a), "re-adding a member after AddIndexers")
	items, err := u.GetIndexer().ByIndex("byApp", "web")
	require.NoError(t, err)
	require.Equal(t, []string{"a/1 v=1"}, descriptions(items))
}

func TestUnionRefuses(t *testing.T) {
	running := newFakeInformer(t, nil, configMap("a", "1", "", "1"))
	running.start(t)
	stopped := newFakeInformer(t, nil, configMap("s", "1", "", "1"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stopped.RunWithContext(ctx) // returns at once: an informer stopped for good

	other := informers.NewUnion[string]("other union")
	otherReg, err := other.AddEventHandler(&recorder{})
	require.NoError(t, err)
	memberReg, err := running.AddEventHandler(&recorder{})
	require.NoError(t, err)

	tests := []struct {
		name    string
		give    func(u *informers.Union[string]) error
		wantErr string // "" for none
	}{
		{
			name:    "a member added twice",
			give:    func(u *informers.Union[string]) error { return u.Add("a", running) },
			wantErr: "test union: member a added twice",
		},
		{
			name:    "a member that cannot take the union's handlers",
			give:    func(u *informers.Union[string]) error { return u.Add("s", stopped) },
			wantErr: "test union: member s: handler",
		},
		{
			name: "removing a member not held does nothing",
			give: func(u *informers.Union[string]) error { return u.Remove("nope") },
		},
		{
			name:    "removing another union's registration",
			give:    func(u *informers.Union[string]) error { return u.RemoveEventHandler(otherReg) },
			wantErr: "not a registration of this informer",
		},
		{
			name:    "removing a member's own registration",
			give:    func(u *informers.Union[string]) error { return u.RemoveEventHandler(memberReg) },
			wantErr: "not a registration of this informer",
		},
		{
			name:    "SetTransform",
			give:    func(u *informers.Union[string]) error { return u.SetTransform(nil) },
			wantErr: "test union is the union of other stores' informers",
		},
		{
			name:    "SetWatchErrorHandler",
			give:    func(u *informers.Union[string]) error { return u.SetWatchErrorHandler(nil) },
			wantErr: "test union is the union of other stores' informers",
		},
		{
			name:    "SetWatchErrorHandlerWithContext",
			give:    func(u *informers.Union[string]) error { return u.SetWatchErrorHandlerWithContext(nil) },
			wantErr: "test union is the union of other stores' informers",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := informers.NewUnion[string]("test union")
			require.NoError(t, u.Add("a", running))
			h := &recorder{}
			_, err := u.AddEventHandler(h)
			require.NoError(t, err)
			h.waitLen(t, 1)

			err = tt.give(u)
			if tt.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tt.wantErr)
			}
			require.Equal(t, []string{"a/1"}, u.GetIndexer().ListKeys(), "the union's members changed")
			require.False(t, u.IsStopped())
		})
	}
}

func TestUnionRemoveEventHandlerTwice(t *testing.T) {
	m := newFakeInformer(t, nil, configMap("a", "1", "", "1"))
	m.start(t)
	u := informers.NewUnion[string]("test union")
	require.NoError(t, u.Add("a", m))
	h1, h2 := &recorder{}, &recorder{}
	reg1, err := u.AddEventHandler(h1)
	require.NoError(t, err)
	_, err = u.AddEventHandler(h2)
	require.NoError(t, err)
	h1.waitLen(t, 1)

	require.NoError(t, u.RemoveEventHandler(reg1))
	require.NoError(t, u.RemoveEventHandler(reg1), "a second removal")
	require.True(t, reg1.HasSynced(), "a removed registration holds nothing back")

	// Handler 2 stays, and handler 1 has left: a change reaches 2 only.
	m.change(t, func(s *fcache.FakeControllerSource) { s.Modify(configMap("a", "1", "", "2")) })
	h2.waitFor(t, "update a/1 v=1 -> a/1 v=2")
	require.Equal(t, []string{"add a/1 v=1 initial=true"}, h1.all())
}

func TestUnionIsStoppedAndRun(t *testing.T) {
	a := newFakeInformer(t, nil)
	a.start(t)
	b := newFakeInformer(t, nil)
	u := informers.NewUnion[int]("test union")
	require.NoError(t, u.Add(1, a))
	require.NoError(t, u.Add(2, b))
	require.False(t, u.IsStopped())
	require.Nil(t, u.GetController())
	require.Empty(t, u.LastSyncResourceVersion())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.RunWithContext(ctx)
	require.True(t, u.IsStopped(), "a member has stopped")
	require.NoError(t, u.Remove(2))
	require.False(t, u.IsStopped(), "the stopped member was removed")

	// Run and RunWithContext only wait, for the members run on their own.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() { u.Run(stop) })
	wg.Go(func() { u.RunWithContext(ctx) })
	close(stop)
	wg.Wait()
}

// get describes what a Get or GetByKey returned.
func get(item any, exists bool, err error) (any, error) {
	if !exists {
		return "not found", err
	}
	return describe(item), err
}

// descriptions describes items, in their order.
func descriptions(items []any) []string {
	out := make([]string, 0, len(items))
	for _, item := range items {
		out = append(out, describe(item))
	}
	return out
}

// inGroups splits s into groups of the sizes given, each sorted, so that
// the order of the groups shows and the order within each does not. A
// length that does not add up is returned whole, to fail the comparison.
func inGroups(s []string, sizes ...int) any {
	total := 0
	for _, n := range sizes {
		total += n
	}
	if len(s) != total {
		return s
	}
	var out [][]string
	for _, n := range sizes {
		out = append(out, sorted(s[:n]))
		s = s[n:]
	}
	return out
}

func indexNames(ix cache.Indexers) []string {
	names := []string{}
	for name := range ix {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func TestUnionConcurrentUse(t *testing.T) {
	a := newFakeInformer(t, nil, configMap("a", "1", "", "1"))
	b := newFakeInformer(t, nil, configMap("b", "1", "", "1"))
	a.start(t)
	b.start(t)
	u := informers.NewUnion[string]("test union")
	require.NoError(t, u.Add("a", a))

	const rounds = 30
	var g errgroup.Group
	g.Go(func() error {
		for range rounds {
			if err := u.Add("b", b); err != nil {
				return err
			}
			if err := u.Remove("b"); err != nil {
				return err
			}
		}
		return nil
	})
	g.Go(func() error {
		for range rounds {
			reg, err := u.AddEventHandler(&recorder{})
			if err != nil {
				return err
			}
			_ = reg.HasSynced()
			_ = cache.IsDone(reg.HasSyncedChecker())
			if err := u.RemoveEventHandler(reg); err != nil {
				return err
			}
		}
		return nil
	})
	g.Go(func() error {
		ix := u.GetIndexer()
		for range rounds {
			if keys := ix.ListKeys(); !slices.Contains(keys, "a/1") {
				return fmt.Errorf("ListKeys %q: member a's object missing", keys)
			}
			if _, ok, _ := ix.GetByKey("a/1"); !ok {
				return errors.New("GetByKey a/1: not found")
			}
			if _, err := ix.ByIndex(cache.NamespaceIndex, "b"); err != nil {
				return err
			}
			_ = ix.List()
			_ = ix.ListIndexFuncValues(cache.NamespaceIndex)
			_ = ix.GetIndexers()
			_ = u.HasSynced()
			_ = u.IsStopped()
			_ = cache.IsDone(u.HasSyncedChecker())
		}
		return nil
	})
	require.NoError(t, g.Wait())

	// What is left works: a handler added now gets both members' objects.
	require.NoError(t, u.Add("b", b))
	h := &recorder{}
	reg, err := u.AddEventHandler(h)
	require.NoError(t, err)
	require.Eventually(t, reg.HasSynced, wait, time.Millisecond)
	require.ElementsMatch(t, []string{"add a/1 v=1 initial=true", "add b/1 v=1 initial=true"}, h.all())
}

// readingHandler reads each object it is told of from the union, as a
// controller reads what it is told to reconcile.
type readingHandler struct {
	recorder
	u *informers.Union[string]
}

func (h *readingHandler) OnAdd(obj any, isInInitialList bool) {
	key, _ := cache.MetaNamespaceKeyFunc(obj)
	if _, ok, _ := h.u.GetIndexer().GetByKey(key); !ok {
		h.record("unreadable " + key)
	}
	h.recorder.OnAdd(obj, isInInitialList)
}

func TestUnionReadsAMemberBeforeItsHandlersHearIt(t *testing.T) {
	objs := make([]*corev1.ConfigMap, 50)
	for i := range objs {
		objs[i] = configMap("a", fmt.Sprint(i), "", "1")
	}
	m := newFakeInformer(t, nil, objs...)
	m.start(t)
	u := informers.NewUnion[string]("test union")
	h := &readingHandler{u: u}
	_, err := u.AddEventHandler(h)
	require.NoError(t, err)

	require.NoError(t, u.Add("a", m))
	events := h.waitLen(t, len(objs))
	require.Len(t, events, len(objs))
	for _, e := range events {
		require.True(t, strings.HasPrefix(e, "add "), "an object heard before it could be read: %s", e)
	}
}

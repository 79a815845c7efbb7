package controlplane

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
)

// These tests pin down how kube-apiserver serves a shard selector (KEP-5866,
// the ShardedListAndWatch feature gate): what sharding a store across
// replicas will build on.

const (
	shardGate  = "ShardedListAndWatch"
	shardLabel = "fxkube.test/sharding"
)

// shardNamespaces hash to both halves of the FNV-1a space (3 below 2^63, 5
// above). Names that differ only at the end, such as "shard-0" to
// "shard-7", share the high bits of their hash and so a half.
var shardNamespaces = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}

// shardHalf is a selector for one half of the hash space of key, on the wire
// and as apimachinery evaluates it.
type shardHalf struct {
	wire string
	sel  sharding.Selector
}

func halves(key string) [2]shardHalf {
	half := func(start, end string) shardHalf {
		return shardHalf{
			wire: fmt.Sprintf("shardRange(%s, '%s', '%s')", key, start, end),
			sel:  sharding.NewSelector(sharding.ShardRangeRequirement{Key: key, Start: start, End: end}),
		}
	}
	return [2]shardHalf{
		half("0x0000000000000000", "0x8000000000000000"),
		half("0x8000000000000000", "0x10000000000000000"),
	}
}

func TestShardedListAndWatch(t *testing.T) {
	cp := startControlPlane(t, WithFeatureGates(map[string]bool{shardGate: true}))
	cs, err := kubernetes.NewForConfig(cp.Config)
	require.NoError(t, err)
	all := createShardedConfigMaps(t, cs, 25)
	uid := halves("object.metadata.uid")

	t.Run("list", func(t *testing.T) {
		for _, key := range []string{"object.metadata.uid", "object.metadata.namespace"} {
			t.Run(key, func(t *testing.T) {
				var got [2]sets.Set[string]
				for i, h := range halves(key) {
					list, err := cs.CoreV1().ConfigMaps("").List(t.Context(),
						metav1.ListOptions{LabelSelector: shardLabel, ShardSelector: h.wire})
					require.NoError(t, err)
					require.NotNil(t, list.ShardInfo, "the server applies the selector")
					assert.Equal(t, h.wire, list.ShardInfo.Selector)
					assert.Equal(t, h.wire, h.sel.String(), "the echo is the parsed selector's String")
					got[i] = keys(list.Items)
					assertShard(t, all, h.sel, got[i])
				}
				assert.Empty(t, sets.List(got[0].Intersection(got[1])), "halves overlap")
				assert.Equal(t, sets.List(sets.KeySet(all)), sets.List(got[0].Union(got[1])), "halves miss objects")
				assert.NotEmpty(t, got[0])
				assert.NotEmpty(t, got[1])
			})
		}
	})

	t.Run("bounds", func(t *testing.T) {
		// A range of the one hash of a namespace holds it: the start is
		// inclusive, the end exclusive.
		hash := sharding.HashField("delta")
		n, err := strconv.ParseUint(hash, 16, 64)
		require.NoError(t, err)
		tests := []struct {
			desc       string
			start, end string
			want       bool // whether the range holds the namespace
		}{
			{desc: "start inclusive", start: "0x" + hash, end: fmt.Sprintf("0x%016x", n+1), want: true},
			{desc: "end exclusive", start: "0x0000000000000000", end: "0x" + hash},
		}
		for _, tt := range tests {
			t.Run(tt.desc, func(t *testing.T) {
				sel := sharding.NewSelector(sharding.ShardRangeRequirement{Key: "object.metadata.namespace", Start: tt.start, End: tt.end})
				list, err := cs.CoreV1().ConfigMaps("").List(t.Context(),
					metav1.ListOptions{LabelSelector: shardLabel, ShardSelector: sel.String()})
				require.NoError(t, err)
				got := keys(list.Items)
				assertShard(t, all, sel, got)
				namespaces := sets.New[string]()
				for k := range got {
					namespaces.Insert(all[k].Namespace)
				}
				assert.Equal(t, tt.want, namespaces.Has("delta"))
			})
		}
	})

	t.Run("pages", func(t *testing.T) {
		opts := metav1.ListOptions{LabelSelector: shardLabel, ShardSelector: uid[0].wire, Limit: 30}
		got := sets.New[string]()
		for pages := 1; ; pages++ {
			list, err := cs.CoreV1().ConfigMaps("").List(t.Context(), opts)
			require.NoError(t, err)
			require.NotNil(t, list.ShardInfo, "page %d", pages)
			assert.Equal(t, uid[0].wire, list.ShardInfo.Selector)
			assert.LessOrEqual(t, len(list.Items), 30)
			got.Insert(sets.List(keys(list.Items))...)
			if opts.Continue = list.Continue; opts.Continue == "" {
				assert.Greater(t, pages, 1)
				break
			}
		}
		assertShard(t, all, uid[0].sel, got)
	})

	t.Run("metadata-only list", func(t *testing.T) {
		mc, err := metadata.NewForConfig(cp.Config)
		require.NoError(t, err)
		list, err := mc.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).List(t.Context(),
			metav1.ListOptions{LabelSelector: shardLabel, ShardSelector: uid[0].wire})
		require.NoError(t, err)
		got := sets.New[string]()
		for _, m := range list.Items {
			got.Insert(m.Namespace + "/" + m.Name)
		}
		assertShard(t, all, uid[0].sel, got)
		// The server filters, but its conversion to PartialObjectMetadataList
		// (asPartialObjectMetadataList in k8s.io/apiserver's
		// endpoints/handlers/response.go) copies the list's resource version
		// and continue token, not its shard info.
		assert.Nil(t, list.ShardInfo)
	})

	t.Run("invalid selector", func(t *testing.T) {
		tests := []struct {
			desc    string
			give    string
			wantErr string
		}{
			{
				desc:    "short hex, as in ListOptions' doc comment",
				give:    "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
				wantErr: `hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)`,
			},
			{
				desc:    "unsupported key",
				give:    "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
				wantErr: `unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace`,
			},
			{
				desc:    "keys mixed",
				give:    uid[0].wire + " || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
				wantErr: `all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace"`,
			},
			{
				desc:    "empty range",
				give:    "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
				wantErr: "shard range start 0x8000000000000000 must be less than end 0x8000000000000000",
			},
		}
		for _, tt := range tests {
			t.Run(tt.desc, func(t *testing.T) {
				_, err := cs.CoreV1().ConfigMaps("").List(t.Context(), metav1.ListOptions{ShardSelector: tt.give})
				require.Error(t, err)
				// ListPredicate returns a plain error, which the handler
				// serves as 500 Internal Error rather than 400 Bad Request.
				assert.True(t, apierrors.IsInternalError(err), "want 500, got %v", err)
				assert.ErrorContains(t, err, "invalid shard selector: "+tt.wantErr)

				_, err = cs.CoreV1().ConfigMaps("").Watch(t.Context(), metav1.ListOptions{ShardSelector: tt.give})
				assert.True(t, apierrors.IsInternalError(err), "want 500, got %v", err)
				assert.ErrorContains(t, err, "invalid shard selector: "+tt.wantErr)
			})
		}
	})

	t.Run("two ranges", func(t *testing.T) {
		// Quarters 0 and 3: || joins ranges of one key.
		q := func(start, end string) sharding.ShardRangeRequirement {
			return sharding.ShardRangeRequirement{Key: "object.metadata.uid", Start: start, End: end}
		}
		sel := sharding.NewSelector(q("0x0000000000000000", "0x4000000000000000"), q("0xc000000000000000", "0x10000000000000000"))
		list, err := cs.CoreV1().ConfigMaps("").List(t.Context(),
			metav1.ListOptions{LabelSelector: shardLabel, ShardSelector: sel.String()})
		require.NoError(t, err)
		require.NotNil(t, list.ShardInfo)
		assert.Equal(t, sel.String(), list.ShardInfo.Selector)
		assertShard(t, all, sel, keys(list.Items))
	})

	t.Run("replica", func(t *testing.T) {
		rep, err := cp.StartReplica()
		require.NoError(t, err)
		defer func() { assert.NoError(t, rep.Close()) }()
		rcs, err := kubernetes.NewForConfig(rep.Config)
		require.NoError(t, err)
		list, err := rcs.CoreV1().ConfigMaps("").List(t.Context(),
			metav1.ListOptions{LabelSelector: shardLabel, ShardSelector: uid[0].wire})
		require.NoError(t, err)
		require.NotNil(t, list.ShardInfo, "the replica runs with the gate")
		assertShard(t, all, uid[0].sel, keys(list.Items))
	})

	t.Run("informer", func(t *testing.T) {
		tests := []struct {
			desc      string
			watchList bool // whether the reflector streams its list in a watch
		}{
			{desc: "watch-list", watchList: true},
			{desc: "list and watch"},
		}
		for _, tt := range tests {
			t.Run(tt.desc, func(t *testing.T) {
				lw := &countingListWatch{
					ListWatch: cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", "",
						func(o *metav1.ListOptions) {
							o.LabelSelector = shardLabel
							o.ShardSelector = uid[0].wire
						}),
					noWatchList: !tt.watchList,
				}
				inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				var wg sync.WaitGroup
				wg.Go(func() { inf.RunWithContext(ctx) })
				defer wg.Wait()
				defer cancel()
				require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))

				assert.ElementsMatch(t, sets.List(inShard(t, all, uid[0].sel)), inf.GetStore().ListKeys())
				lists, watches := lw.counts()
				if tt.watchList {
					assert.Zero(t, lists, "the reflector must stream its list in a watch, not LIST")
				} else {
					assert.Positive(t, lists)
				}
				assert.Positive(t, watches)
			})
		}
	})

	t.Run("watch", func(t *testing.T) {
		list, err := cs.CoreV1().ConfigMaps("").List(t.Context(), metav1.ListOptions{LabelSelector: shardLabel})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		// A watch from the list's resource version, and a watch-list
		// (sendInitialEvents) that first streams the shard's objects.
		w, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{
			LabelSelector:   shardLabel,
			ShardSelector:   uid[0].wire,
			ResourceVersion: list.ResourceVersion,
		})
		require.NoError(t, err)
		defer w.Stop()
		wl, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{
			LabelSelector:        shardLabel,
			ShardSelector:        uid[0].wire,
			SendInitialEvents:    new(true),
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			AllowWatchBookmarks:  true,
		})
		require.NoError(t, err)
		defer wl.Stop()

		want := sets.List(inShard(t, all, uid[0].sel))
		initial := readEvents(t, wl, func(ev watch.Event) bool {
			return ev.Type == watch.Bookmark &&
				ev.Object.(*corev1.ConfigMap).Annotations[metav1.InitialEventsAnnotationKey] == "true"
		})
		assert.ElementsMatch(t, prefixed("ADDED ", want), summarize(initial))

		// Delete everything, then create objects until one is in the shard:
		// once its event arrives, every earlier one has.
		for _, ns := range shardNamespaces {
			require.NoError(t, cs.CoreV1().ConfigMaps(ns).DeleteCollection(t.Context(),
				metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: shardLabel}))
		}
		var last *corev1.ConfigMap
		for i := 0; ; i++ {
			last = createConfigMap(t, cs, shardNamespaces[0], "late-"+strconv.Itoa(i))
			in, err := uid[0].sel.Matches(last)
			require.NoError(t, err)
			if in {
				break
			}
		}
		wantLater := append(prefixed("DELETED ", want), "ADDED "+shardNamespaces[0]+"/"+last.Name)
		isLast := func(ev watch.Event) bool {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			return ok && ev.Type == watch.Added && cm.UID == last.UID
		}
		for desc, w := range map[string]watch.Interface{"watch": w, "watch-list": wl} {
			assert.ElementsMatch(t, wantLater, summarize(readEvents(t, w, isLast)), desc)
		}
	})
}

// TestShardSelectorWithoutGate shows what a kube-apiserver without the
// ShardedListAndWatch gate, the default, does with a shard selector: it
// ignores it, invalid or not, and serves every object, without shard info.
func TestShardSelectorWithoutGate(t *testing.T) {
	cp := startControlPlane(t)
	cs, err := kubernetes.NewForConfig(cp.Config)
	require.NoError(t, err)
	all := createShardedConfigMaps(t, cs, 3)
	uid := halves("object.metadata.uid")
	require.Less(t, inShard(t, all, uid[0].sel).Len(), len(all), "some objects must be outside the shard")

	for _, sel := range []string{uid[0].wire, "shardRange(object.metadata.name, '0x0', '0x1')", "not a selector"} {
		t.Run(sel, func(t *testing.T) {
			list, err := cs.CoreV1().ConfigMaps("").List(t.Context(),
				metav1.ListOptions{LabelSelector: shardLabel, ShardSelector: sel})
			require.NoError(t, err)
			assert.Nil(t, list.ShardInfo)
			assert.Equal(t, sets.List(sets.KeySet(all)), sets.List(keys(list.Items)))

			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			w, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{
				LabelSelector:        shardLabel,
				ShardSelector:        sel,
				SendInitialEvents:    new(true),
				ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
				AllowWatchBookmarks:  true,
			})
			require.NoError(t, err)
			defer w.Stop()
			initial := readEvents(t, w, func(ev watch.Event) bool { return ev.Type == watch.Bookmark })
			assert.ElementsMatch(t, prefixed("ADDED ", sets.List(sets.KeySet(all))), summarize(initial))
		})
	}
}

func TestWithFeatureGates(t *testing.T) {
	shared := map[string]bool{"B": true}
	tests := []struct {
		desc string
		give []Option
		want string
	}{
		{desc: "none"},
		{desc: "empty", give: []Option{WithFeatureGates(nil)}},
		{
			desc: "sorted",
			give: []Option{WithFeatureGates(map[string]bool{"Zeta": false, "Alpha": true})},
			want: "Alpha=true,Zeta=false",
		},
		{
			desc: "later wins",
			give: []Option{WithFeatureGates(map[string]bool{"A": true, "B": true}), WithFeatureGates(map[string]bool{"B": false})},
			want: "A=true,B=false",
		},
		{
			desc: "copies the map",
			give: []Option{WithFeatureGates(shared)},
			want: "B=true",
		},
	}
	shared["B"] = false
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			assert.Equal(t, tt.want, newOptions(tt.give).featureGatesFlag())
		})
	}
}

// TestStartUnknownFeatureGate checks that the error names the gates and how
// to see kube-apiserver's own message ("unrecognized feature gate"), as
// envtest hides its output.
func TestStartUnknownFeatureGate(t *testing.T) {
	dir, err := AssetsDir()
	require.NoError(t, err)
	_, err = Start(dir, WithFeatureGates(map[string]bool{"NoSuchGate": true}))
	require.ErrorContains(t, err, "start kube-apiserver --feature-gates=NoSuchGate=true and etcd from "+dir+": ")
	require.ErrorContains(t, err, "; KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true shows their output")
}

func startControlPlane(t *testing.T, opts ...Option) *Running {
	t.Helper()
	dir, err := AssetsDir()
	require.NoError(t, err)
	cp, err := Start(dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cp.Stop()) })
	return cp
}

// createShardedConfigMaps creates perNamespace labelled ConfigMaps in each
// of shardNamespaces and returns them by namespace/name.
func createShardedConfigMaps(t *testing.T, cs kubernetes.Interface, perNamespace int) map[string]*corev1.ConfigMap {
	t.Helper()
	all := make(map[string]*corev1.ConfigMap)
	for _, ns := range shardNamespaces {
		_, err := cs.CoreV1().Namespaces().Create(t.Context(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		for i := range perNamespace {
			cm := createConfigMap(t, cs, ns, "cm-"+strconv.Itoa(i))
			all[ns+"/"+cm.Name] = cm
		}
	}
	return all
}

func createConfigMap(t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: ns, Labels: map[string]string{shardLabel: ""},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return cm
}

// inShard returns the keys of the objects of all that sel matches, as
// apimachinery evaluates it on the client.
func inShard(t *testing.T, all map[string]*corev1.ConfigMap, sel sharding.Selector) sets.Set[string] {
	t.Helper()
	in := sets.New[string]()
	for k, cm := range all {
		ok, err := sel.Matches(cm)
		require.NoError(t, err)
		if ok {
			in.Insert(k)
		}
	}
	return in
}

// assertShard asserts that got holds exactly the objects of all that sel
// matches on the client.
func assertShard(t *testing.T, all map[string]*corev1.ConfigMap, sel sharding.Selector, got sets.Set[string]) {
	t.Helper()
	assert.Equal(t, sets.List(inShard(t, all, sel)), sets.List(got), "served and matched on the client differ")
}

func keys(items []corev1.ConfigMap) sets.Set[string] {
	s := sets.New[string]()
	for _, cm := range items {
		s.Insert(cm.Namespace + "/" + cm.Name)
	}
	return s
}

func prefixed(prefix string, keys []string) []string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = prefix + k
	}
	return s
}

// summarize returns "TYPE namespace/name" of each event but bookmarks.
func summarize(events []watch.Event) []string {
	var s []string
	for _, ev := range events {
		if ev.Type == watch.Bookmark {
			continue
		}
		cm := ev.Object.(*corev1.ConfigMap)
		s = append(s, string(ev.Type)+" "+cm.Namespace+"/"+cm.Name)
	}
	return s
}

// readEvents reads events from w up to and including the first for which
// last returns true.
func readEvents(t *testing.T, w watch.Interface, last func(watch.Event) bool) []watch.Event {
	t.Helper()
	var events []watch.Event
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "watch ended after %v", summarize(events))
			require.NotEqual(t, watch.Error, ev.Type, "watch error: %v", ev.Object)
			events = append(events, ev)
			if last(ev) {
				return events
			}
		case <-timeout:
			require.FailNow(t, "timed out", "events so far: %v", summarize(events))
		}
	}
}

// countingListWatch counts the lists and watches a reflector makes through
// it, and can tell the reflector not to stream its lists in watches.
type countingListWatch struct {
	*cache.ListWatch
	noWatchList bool

	mu             sync.Mutex
	lists, watches int
}

func (lw *countingListWatch) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	lw.mu.Lock()
	lw.lists++
	lw.mu.Unlock()
	return lw.ListWatch.ListWithContext(ctx, o)
}

func (lw *countingListWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	lw.mu.Lock()
	lw.watches++
	lw.mu.Unlock()
	return lw.ListWatch.WatchWithContext(ctx, o)
}

// IsWatchListSemanticsUnSupported is what client-go's reflector asks (see
// watchlist.DoesClientNotSupportWatchListSemantics).
func (lw *countingListWatch) IsWatchListSemanticsUnSupported() bool { return lw.noWatchList }

func (lw *countingListWatch) counts() (lists, watches int) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.lists, lw.watches
}

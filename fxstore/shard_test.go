package fxstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

func shardRange(key, start, end string) sharding.ShardRangeRequirement {
	return sharding.ShardRangeRequirement{Key: key, Start: start, End: end}
}

// For refuses a bad shard selector, saying why.
func TestShardSelectors(t *testing.T) {
	for _, tt := range []struct {
		name string
		sel  sharding.Selector
		want string
	}{
		{"another key", sharding.NewSelector(shardRange("object.metadata.name", "0x0000000000000000", "0x8000000000000000")), `key "object.metadata.name" is not object.metadata.uid or object.metadata.namespace`},
		{"two keys", sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x0000000000000000", "0x1000000000000000"), shardRange(fxstore.ShardByNamespace, "0x2000000000000000", "0x3000000000000000")), "shard on one key"},
		{"short bounds", sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x0", "0x8")), "16 lowercase hex digits"},
		{"upper case", sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x000000000000000A", "0x8000000000000000")), "16 lowercase hex digits"},
		{"empty range", sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x8000000000000000", "0x8000000000000000")), "its start must be below its end"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := fxstore.NewRegistry(clientgoscheme.Scheme)
			_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Shard: tt.sel})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// A sharded store's key names its shard; it neither covers nor is covered
// by another, and matching an object decides its shard as the API server
// does.
func TestShardedKeys(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	lower := sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x0000000000000000", "0x8000000000000000"),
		shardRange(fxstore.ShardByUID, "0xc000000000000000", "0x10000000000000000"))
	s, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Shard: lower})
	require.NoError(t, err)
	all, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	assert.Equal(t, `ConfigMap/v1 (all namespaces, shard "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')")`, s.String())
	assert.False(t, fxstore.Covers(all.Key(), s.Key()))
	assert.False(t, fxstore.Covers(s.Key(), all.Key()))
	assert.False(t, fxstore.Covers(s.Key(), s.Key()), "not even itself: a shard is the API server's to select")

	match, err := fxstore.KeyMatcher(s.Key())
	require.NoError(t, err)
	in, out := 0, 0
	for range 200 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: uuid.NewUUID()}}
		want, err := lower.Matches(cm)
		require.NoError(t, err)
		assert.Equal(t, want, match(cm), cm.UID)
		if want {
			in++
		} else {
			out++
		}
	}
	assert.Positive(t, in)
	assert.Positive(t, out)
}

// A store held is released once every hold is, and not before: its
// informer stops, the registry forgets it, and reads fail rather than
// serve what it held. Releasing twice does nothing more, and a store a
// constructor asked for (For) lives on.
func TestHeldStoreIsReleasedWithItsLastHold(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	lower := sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x0000000000000000", "0x8000000000000000"))
	all, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	objs := make([]client.Object, 20)
	for i := range objs {
		cm := testenv.ConfigMap("a", fmt.Sprintf("cm-%d", i))
		cm.UID = uuid.NewUUID()
		objs[i] = cm
	}
	src := fxstoretest.NewSource(clientgoscheme.Scheme, objs...)
	fxstoretest.Start(t, r, src)

	one, err := fxstore.Hold[*corev1.ConfigMap](t.Context(), r, fxstore.Spec{Shard: lower}, fxstore.WithConsumer("one"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	_, err = fxstore.Hold[*corev1.ConfigMap](ctx, r, fxstore.Spec{Shard: lower}, fxstore.WithConsumer("two"))
	require.NoError(t, err)
	require.NoError(t, r.WaitForStore(t.Context(), one.Key()))
	n, err := one.Count()
	require.NoError(t, err)
	assert.Positive(t, n)
	assert.Less(t, n, len(objs))

	var events recorded
	sub, err := one.Subscribe(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { events.add(obj.(*corev1.ConfigMap).Name) }})
	require.NoError(t, err)
	require.NoError(t, sub.WaitForSync(t.Context()))

	one.Release()
	one.Release()
	_, err = one.Count()
	require.NoError(t, err, "the other hold still reads it: releasing twice released one hold")
	assert.Equal(t, []string{"two"}, testenv.StoreInfo(t, r, one.Key()).Consumers)
	cancel()
	eventually(t, func() bool { _, err := one.Count(); return errors.Is(err, fxstore.ErrNotSynced) })
	assert.Len(t, r.Stores(), 1, "the registry forgets it")
	seen := len(events.get())
	for i := range 10 {
		cm := testenv.ConfigMap("a", fmt.Sprintf("new-%d", i))
		cm.UID = uuid.NewUUID()
		require.NoError(t, src.Client().Create(t.Context(), cm))
	}
	eventually(t, func() bool { c, _ := all.Count(); return c == len(objs)+10 })
	assert.Len(t, events.get(), seen, "its informer has stopped")

	// A hold of the store a constructor asked for ends with no more.
	held, err := fxstore.Hold[*corev1.ConfigMap](t.Context(), r, fxstore.Spec{})
	require.NoError(t, err)
	held.Release()
	c, err := all.Count()
	require.NoError(t, err)
	assert.Equal(t, len(objs)+10, c)
}

// Where the API server ignores shard selectors, sharded stores are views of
// the store of their whole spec: one list and watch of every object, not
// one per shard. The whole store is made for them if no one asked for it,
// and dropped with the last of them; a shard dropped stops its handlers and
// can be asked for again.
func TestShardsServedFromWholeStore(t *testing.T) {
	lower := sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x0000000000000000", "0x8000000000000000"))
	upper := sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x8000000000000000", "0x10000000000000000"))
	newCM := func(name string) *corev1.ConfigMap {
		cm := testenv.ConfigMap("a", name, testenv.Labels{"app": "x"})
		cm.UID = uuid.NewUUID()
		return cm
	}
	objs := make([]client.Object, 40)
	for i := range objs {
		objs[i] = newCM(fmt.Sprintf("cm-%d", i))
	}
	start := func(t *testing.T) (*fxstore.Registry, *fxstoretest.Source, *observer.ObservedLogs) {
		core, logs := observer.New(zapcore.WarnLevel)
		r := fxstore.NewRegistry(clientgoscheme.Scheme, fxstore.WithLogger(zap.New(core)))
		src := fxstoretest.NewSource(clientgoscheme.Scheme, objs...)
		src.IgnoreShardSelectors()
		fxstoretest.Start(t, r, src)
		return r, src, logs
	}
	spec := func(shard sharding.Selector) fxstore.Spec { return fxstore.Spec{LabelSelector: "app=x", Shard: shard} }
	names := func(t *testing.T, s *fxstore.Store[*corev1.ConfigMap]) []string {
		t.Helper()
		list, err := s.List()
		require.NoError(t, err)
		out := make([]string, len(list))
		for i, o := range list {
			out[i] = o.Name
		}
		return out
	}
	inShard := func(sel sharding.Selector, list []client.Object) []string {
		var out []string
		for _, o := range list {
			if ok, _ := sel.Matches(o); ok {
				out = append(out, o.GetName())
			}
		}
		return out
	}

	t.Run("made for the shards", func(t *testing.T) {
		r, src, logs := start(t)
		applied, err := r.CheckShardSelectors(t.Context(), fxstore.Key{Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap")})
		require.NoError(t, err)
		require.False(t, applied)
		lo, err := fxstore.Hold[*corev1.ConfigMap](t.Context(), r, spec(lower))
		require.NoError(t, err)
		hi, err := fxstore.Hold[*corev1.ConfigMap](t.Context(), r, spec(upper))
		require.NoError(t, err)
		require.NoError(t, r.WaitForStore(t.Context(), lo.Key()))
		require.NoError(t, r.WaitForStore(t.Context(), hi.Key()))

		wholeKey := lo.Key()
		wholeKey.Shard = ""
		infos := r.Stores()
		require.Len(t, infos, 3, "the two shards and the store of their whole spec")
		for _, info := range infos {
			if info.Key == wholeKey {
				assert.Nil(t, info.ViewOf, "the whole store has the informer")
				assert.Equal(t, []string{"fxstore, for the shards of this spec: the API server does not apply shard selectors"}, info.Consumers)
				continue
			}
			require.NotNil(t, info.ViewOf, "%s", info.Key)
			assert.Equal(t, wholeKey, *info.ViewOf, "%s is a view of the whole store", info.Key)
			assert.True(t, info.Status.ShardOnClient)
			assert.Zero(t, info.Status.OutsideShard, "nothing arrives at a view to drop")
		}
		assert.ElementsMatch(t, inShard(lower, objs), names(t, lo.Store))
		assert.ElementsMatch(t, inShard(upper, objs), names(t, hi.Store))
		assert.Len(t, logs.FilterMessageSnippet("does not apply shard selectors").All(), 1, "said once, for the whole store")

		// A dropped shard's handlers hear nothing more; asked for again,
		// it is a view again, of the same objects.
		var events recorded
		sub, err := lo.Subscribe(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { events.add(obj.(*corev1.ConfigMap).Name) }})
		require.NoError(t, err)
		require.NoError(t, sub.WaitForSync(t.Context()))
		assert.ElementsMatch(t, inShard(lower, objs), events.get(), "the shard's objects, and only those")
		lo.Release()
		var added []client.Object
		for i := range 20 {
			cm := newCM(fmt.Sprintf("new-%d", i))
			require.NoError(t, src.Client().Create(t.Context(), cm))
			added = append(added, cm)
		}
		require.NotEmpty(t, inShard(lower, added))
		// One watch delivers in order: once the upper shard holds an object
		// made last, the whole store has heard every one before it.
		last := newCM("last")
		for ok, _ := upper.Matches(last); !ok; ok, _ = upper.Matches(last) {
			last = newCM("last")
		}
		require.NoError(t, src.Client().Create(t.Context(), last))
		added = append(added, last)
		eventually(t, func() bool { return slices.Contains(names(t, hi.Store), "last") })
		assert.ElementsMatch(t, inShard(upper, append(objs, added...)), names(t, hi.Store))
		assert.ElementsMatch(t, inShard(lower, objs), events.get(), "a released shard's handlers hear nothing more")
		lo, err = fxstore.Hold[*corev1.ConfigMap](t.Context(), r, spec(lower))
		require.NoError(t, err)
		require.NoError(t, r.WaitForStore(t.Context(), lo.Key()))
		assert.ElementsMatch(t, inShard(lower, append(objs, added...)), names(t, lo.Store))
		for _, info := range r.Stores() {
			if info.Key == lo.Key() {
				require.NotNil(t, info.ViewOf, "asked for again, a view again")
				assert.Equal(t, wholeKey, *info.ViewOf)
				assert.True(t, info.Status.ShardOnClient)
			}
		}

		// The whole store goes with the last shard.
		lo.Release()
		hi.Release()
		assert.Empty(t, r.Stores())
	})

	// A store asked for late that the store made for the shards covers is
	// a view of it, and keeps it running once the last shard is dropped.
	t.Run("covering a store asked for late", func(t *testing.T) {
		r, src, _ := start(t)
		_, err := r.CheckShardSelectors(t.Context(), fxstore.Key{Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap")})
		require.NoError(t, err)
		all := func(shard sharding.Selector) fxstore.Spec { return fxstore.Spec{Shard: shard} }
		lo, err := fxstore.Hold[*corev1.ConfigMap](t.Context(), r, all(lower))
		require.NoError(t, err)
		require.NoError(t, r.WaitForStore(t.Context(), lo.Key()))
		labelled, err := fxstore.For[*corev1.ConfigMap](r, spec(nil))
		require.NoError(t, err)
		require.NoError(t, r.WaitForStore(t.Context(), labelled.Key()))
		wholeKey := lo.Key()
		wholeKey.Shard = ""
		for _, info := range r.Stores() {
			if info.Key == labelled.Key() {
				require.NotNil(t, info.ViewOf)
				assert.Equal(t, wholeKey, *info.ViewOf, "a view of the store made for the shards")
			}
		}
		lo.Release()
		require.NoError(t, src.Client().Create(t.Context(), newCM("after-the-shards")))
		eventually(t, func() bool { return slices.Contains(names(t, labelled), "after-the-shards") })
		assert.True(t, labelled.HasSynced())
	})

	t.Run("asked for by a module too", func(t *testing.T) {
		r, _, _ := start(t)
		whole, err := fxstore.For[*corev1.ConfigMap](r, spec(nil))
		require.NoError(t, err)
		_, err = r.CheckShardSelectors(t.Context(), whole.Key())
		require.NoError(t, err)
		lo, err := fxstore.Hold[*corev1.ConfigMap](t.Context(), r, spec(lower))
		require.NoError(t, err)
		require.NoError(t, r.WaitForStore(t.Context(), lo.Key()))
		infos := r.Stores()
		require.Len(t, infos, 2)
		require.NotNil(t, infos[1].ViewOf)
		assert.Equal(t, whole.Key(), *infos[1].ViewOf)
		assert.ElementsMatch(t, inShard(lower, objs), names(t, lo.Store))
		lo.Release()
		require.Len(t, r.Stores(), 1, "the module's store stays")
		n, err := whole.Count()
		require.NoError(t, err)
		assert.Equal(t, len(objs), n)
	})

	t.Run("where the API server applies them", func(t *testing.T) {
		r := fxstore.NewRegistry(clientgoscheme.Scheme)
		whole, err := fxstore.For[*corev1.ConfigMap](r, spec(nil))
		require.NoError(t, err)
		fxstoretest.Start(t, r, fxstoretest.NewSource(clientgoscheme.Scheme, objs...))
		applied, err := r.CheckShardSelectors(t.Context(), whole.Key())
		require.NoError(t, err)
		require.True(t, applied)
		lo, err := fxstore.For[*corev1.ConfigMap](r, spec(lower))
		require.NoError(t, err)
		require.NoError(t, r.WaitForStore(t.Context(), lo.Key()))
		for _, info := range r.Stores() {
			assert.Nil(t, info.ViewOf, "%s: the API server selects the shard; it lists and watches its own", info.Key)
			assert.False(t, info.Status.ShardOnClient)
		}
		assert.ElementsMatch(t, inShard(lower, objs), names(t, lo))
	})

	t.Run("before start", func(t *testing.T) {
		r := fxstore.NewRegistry(clientgoscheme.Scheme)
		_, err := r.CheckShardSelectors(t.Context(), fxstore.Key{Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap")})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "after the registry has started")
	})
}

// failingSource fails the first bind of the store with key fail.
type failingSource struct {
	*fxstoretest.Source
	fail   fxstore.Key
	failed atomic.Bool
}

func (s *failingSource) Bind(ctx context.Context, key fxstore.Key) (fxstore.Binding, error) {
	if key == s.fail && s.failed.CompareAndSwap(false, true) {
		return fxstore.Binding{}, errors.New("the API server said no, once")
	}
	return s.Source.Bind(ctx, key)
}

// A whole store made for shards that cannot start fails its shards' waits
// at once, naming it, and is started again when they are waited for or a
// shard more is asked for.
func TestShardsOfAWholeStoreThatCannotStart(t *testing.T) {
	lower := sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x0000000000000000", "0x8000000000000000"))
	upper := sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x8000000000000000", "0x10000000000000000"))
	objs := make([]client.Object, 20)
	for i := range objs {
		cm := testenv.ConfigMap("a", fmt.Sprintf("cm-%d", i))
		cm.UID = uuid.NewUUID()
		objs[i] = cm
	}
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	whole, err := fxstore.KeyFor[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	inner := fxstoretest.NewSource(clientgoscheme.Scheme, objs...)
	inner.IgnoreShardSelectors()
	src := &failingSource{Source: inner, fail: whole}
	require.NoError(t, r.Start(t.Context(), src))
	t.Cleanup(r.Stop)
	_, err = r.CheckShardSelectors(t.Context(), whole)
	require.NoError(t, err)

	lo, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Shard: lower})
	require.NoError(t, err)
	eventually(t, src.failed.Load)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = r.WaitForSync(ctx)
	require.Error(t, err, "fails at once: the shard's store cannot start")
	assert.Contains(t, err.Error(), "store ConfigMap/v1 (all namespaces, shard \"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')\"): cannot start: its store "+whole.String()+": the API server said no, once")
	require.NoError(t, ctx.Err())

	// Waited for, the whole store starts again, and its shards with it.
	require.NoError(t, r.WaitForStore(ctx, lo.Key()))
	hi, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Shard: upper})
	require.NoError(t, err)
	require.NoError(t, r.WaitForStore(ctx, hi.Key()))
	nlo, err := lo.Count()
	require.NoError(t, err)
	nhi, err := hi.Count()
	require.NoError(t, err)
	assert.Equal(t, len(objs), nlo+nhi)
	for _, info := range r.Stores() {
		if info.Key != whole {
			assert.Equal(t, &whole, info.ViewOf, "%s is a view of the whole store", info.Key)
		}
	}
}

package fxstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/storehooks"
	"github.com/fxkube/fxkube/internal/testenv"
)

// heldSource holds back the list and watch of the stores of one shard
// until release is called.
type heldSource struct {
	*fxstoretest.Source
	shard   string
	release func()
	done    chan struct{}
}

func newHeldSource(src *fxstoretest.Source, shard sharding.Selector) *heldSource {
	s := &heldSource{Source: src, shard: shard.String(), done: make(chan struct{})}
	s.release = sync.OnceFunc(func() { close(s.done) })
	return s
}

func (s *heldSource) Bind(ctx context.Context, key fxstore.Key) (fxstore.Binding, error) {
	b, err := s.Source.Bind(ctx, key)
	if err == nil && key.Shard == s.shard {
		b.ListerWatcher = heldListerWatcher{b.ListerWatcher, s.done}
	}
	return b, err
}

// heldListerWatcher lists and watches once done is closed.
type heldListerWatcher struct {
	cache.ListerWatcher
	done <-chan struct{}
}

// IsWatchListSemanticsUnSupported tells client-go's reflector to list, as
// the in-memory source does.
func (heldListerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

func (l heldListerWatcher) ListWithContext(ctx context.Context, o metav1.ListOptions) (k8sruntime.Object, error) {
	select {
	case <-l.done:
		return cache.ToListerWatcherWithContext(l.ListerWatcher).ListWithContext(ctx, o)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l heldListerWatcher) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	select {
	case <-l.done:
		return cache.ToListerWatcherWithContext(l.ListerWatcher).WatchWithContext(ctx, o)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A sharded store reads the stores of the buckets it holds as one, and has
// synced while each of them has: a bucket added is not synced until its
// informer is, and one removed no longer counts. While a bucket syncs, Get
// finds the objects of those synced, and other reads fail.
func TestShardedStoreFollowsItsBuckets(t *testing.T) {
	lower := sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x0000000000000000", "0x8000000000000000"))
	upper := sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x8000000000000000", "0x10000000000000000"))
	objs := make([]client.Object, 40)
	var inLower, inUpper *corev1.ConfigMap
	for i := range objs {
		cm := testenv.ConfigMap("a", fmt.Sprintf("cm-%d", i))
		cm.UID = uuid.NewUUID()
		objs[i] = cm
		if ok, _ := lower.Matches(cm); ok {
			inLower = cm
		} else {
			inUpper = cm
		}
	}
	require.NotNil(t, inLower)
	require.NotNil(t, inUpper)
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	hooks := storehooks.Get[*fxstore.Registry, fxstore.Key, fxstore.Spec, fxstore.Option]()
	opt, buckets := hooks.Sharded(func(bucket int) string { return fmt.Sprintf("bucket %d", bucket) })
	s, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, opt)
	require.NoError(t, err)
	src := newHeldSource(fxstoretest.NewSource(clientgoscheme.Scheme, objs...), upper)
	require.NoError(t, r.Start(t.Context(), src))
	t.Cleanup(r.Stop)
	t.Cleanup(src.release)
	var heard recorded
	_, err = s.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { heard.add("add " + obj.(*corev1.ConfigMap).Name) },
		DeleteFunc: func(obj any) { heard.add("delete") },
	})
	require.NoError(t, err)
	shortWait := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		return s.WaitForSync(ctx)
	}

	assert.True(t, s.HasSynced(), "no bucket: nothing to wait for")
	_, err = s.Get("a", inLower.Name)
	assert.True(t, apierrors.IsNotFound(err), "no bucket: %v", err)

	require.NoError(t, buckets.Acquire(0, lower))
	require.NoError(t, s.WaitForSync(t.Context()))
	nLower, err := s.Count()
	require.NoError(t, err)
	assert.Positive(t, nLower)
	assert.Equal(t, []int{0}, buckets.Held())

	require.NoError(t, buckets.Acquire(1, upper))
	assert.False(t, s.HasSynced(), "a bucket added is not synced until its informer is")
	require.ErrorIs(t, shortWait(), context.DeadlineExceeded)
	held, synced := buckets.Synced(1)
	assert.True(t, held)
	assert.False(t, synced)
	got, err := s.Get("a", inLower.Name)
	require.NoError(t, err, "an object of a synced bucket")
	assert.Equal(t, inLower.UID, got.UID)
	_, err = s.Get("a", inUpper.Name)
	require.ErrorIs(t, err, fxstore.ErrNotSynced, "it may be in the bucket not synced")
	_, err = s.Count()
	require.ErrorIs(t, err, fxstore.ErrNotSynced)
	_, err = s.List()
	require.ErrorIs(t, err, fxstore.ErrNotSynced)

	require.NoError(t, buckets.Release(1))
	assert.True(t, s.HasSynced(), "a bucket removed no longer counts")
	require.NoError(t, shortWait())
	require.NoError(t, buckets.Release(1), "releasing a bucket not held")
	assert.Len(t, r.Stores(), 1, "the registry holds the stores of the buckets held, not the sharded store")

	require.NoError(t, buckets.Acquire(1, upper))
	assert.False(t, s.HasSynced())
	src.release()
	require.NoError(t, s.WaitForSync(t.Context()))
	n, err := s.Count()
	require.NoError(t, err)
	assert.Equal(t, len(objs), n)
	got, err = s.Get("a", inUpper.Name)
	require.NoError(t, err)
	assert.Equal(t, inUpper.UID, got.UID)
	list, err := s.List(client.InNamespace("a"))
	require.NoError(t, err)
	assert.Len(t, list, len(objs))
	assert.Equal(t, []int{0, 1}, buckets.Held())
	eventually(t, func() bool { return len(heard.get()) == len(objs) })
	assert.NotContains(t, heard.get(), "delete", "a bucket removed sends no Delete")
}

// A sharded store fails while one of its buckets' stores does. Its
// handlers hear it begin to fail and work again once each, however many
// buckets fail.
func TestShardedStoreHealthIsItsBuckets(t *testing.T) {
	lower := sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x0000000000000000", "0x8000000000000000"))
	upper := sharding.NewSelector(shardRange(fxstore.ShardByUID, "0x8000000000000000", "0x10000000000000000"))
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	hooks := storehooks.Get[*fxstore.Registry, fxstore.Key, fxstore.Spec, fxstore.Option]()
	opt, buckets := hooks.Sharded(func(bucket int) string { return fmt.Sprintf("bucket %d", bucket) })
	s, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, opt)
	require.NoError(t, err)
	src := fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("a", "x"))
	require.NoError(t, r.Start(t.Context(), src))
	t.Cleanup(r.Stop)
	require.NoError(t, buckets.Acquire(0, lower))
	require.NoError(t, buckets.Acquire(1, upper))
	require.NoError(t, s.WaitForSync(t.Context()))
	var heard testenv.Records[error]
	_, err = s.Subscribe(fxstore.HandlerFuncs[*corev1.ConfigMap]{HealthFunc: heard.Add})
	require.NoError(t, err)
	require.NoError(t, s.Err())

	restore := src.Fail(apierrors.NewForbidden(corev1.Resource("configmaps"), "", errors.New("access revoked")))
	eventually(t, func() bool { return s.Err() != nil })
	assert.ErrorContains(t, s.Err(), "forbidden")
	// Both buckets fail: the store is failing once.
	eventually(t, func() bool {
		for _, st := range r.Stores() {
			if st.Status.FailingSince.IsZero() {
				return false
			}
		}
		return true
	})
	require.Len(t, heard.All(), 1)
	assert.Error(t, heard.All()[0])

	restore()
	eventually(t, func() bool { return s.Err() == nil })
	eventually(t, func() bool { return len(heard.All()) == 2 })
	assert.NoError(t, heard.All()[1], "working again")
}

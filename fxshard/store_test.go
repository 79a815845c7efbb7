package fxshard_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

// What fxshard.For refuses, each error naming the store and the fix; a
// refused store registers nothing.
func TestForRefuses(t *testing.T) {
	reg := fxstore.NewRegistry(clientgoscheme.Scheme)
	shards, err := fxshard.NewShards(reg, fake.NewClientset(), fxshard.Config{Namespace: "ops", Name: "app"})
	require.NoError(t, err)
	for _, tt := range []struct {
		name     string
		spec     fxstore.Spec
		shardKey string
		want     string
	}{
		{"a shard of its own", fxstore.Spec{Shard: sharding.NewSelector(sharding.ShardRangeRequirement{Key: fxstore.ShardByUID, Start: "0x0000000000000000", End: "0x8000000000000000"})},
			fxstore.ShardByUID, "): Spec.Shard is set; fxshard.For chooses each bucket's shard, leave it empty"},
		{"another key", fxstore.Spec{}, "object.metadata.name",
			`sharded store ConfigMap/v1 (all namespaces): shard key "object.metadata.name" is not supported; use fxstore.ShardByUID or fxstore.ShardByNamespace`},
		{"a bad spec", fxstore.Spec{LabelSelector: "a in ("}, fxstore.ShardByUID, `invalid label selector "a in ("`},
		{"one namespace by namespace", fxstore.Spec{Namespace: "team"}, fxstore.ShardByNamespace,
			`sharded store ConfigMap/v1 (namespace "team"): sharded by namespace, it selects one namespace, so all its objects would be in one bucket; shard it by fxstore.ShardByUID`},
		{"a namespace field by namespace", fxstore.Spec{FieldSelector: "metadata.namespace=team"}, fxstore.ShardByNamespace,
			"sharded by namespace, it selects one namespace"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fxshard.For[*corev1.ConfigMap](shards, tt.spec, tt.shardKey)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	assert.Empty(t, shards.Info().Stores)
	assert.Empty(t, reg.Stores())
	var nilStore *fxshard.Store[*corev1.ConfigMap]
	_, err = fxcontroller.New("x", nilStore, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "primary store is nil; pass the store fxstore.For or fxshard.For returned")
}

// A sharded store is a store to controllers without a method of its own for
// it: New reconciles it through its gate, on every replica, and Watches
// takes it as it takes any store.
func TestStoreIsAPrimaryWithoutAGateInItsAPI(t *testing.T) {
	_, ok := reflect.TypeFor[*fxshard.Store[*corev1.ConfigMap]]().MethodByName("Gate")
	require.False(t, ok, "Gate is not in the sharded store's method set")

	reg := fxstore.NewRegistry(clientgoscheme.Scheme)
	shards, err := fxshard.NewShards(reg, fake.NewClientset(), fxshard.Config{Namespace: "ops", Name: "app"})
	require.NoError(t, err)
	store, err := fxshard.For[*corev1.ConfigMap](shards, fxstore.Spec{}, fxstore.ShardByUID)
	require.NoError(t, err)
	secrets, err := fxshard.For[*corev1.Secret](shards, fxstore.Spec{}, fxstore.ShardByUID)
	require.NoError(t, err)
	c, err := fxcontroller.New("sharded", store, reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), fxcontroller.Watches(secrets, &handler.EnqueueRequestForObject{}))
	require.NoError(t, err)
	require.False(t, c.NeedLeaderElection(), "a controller of a sharded store runs on every replica")
}

// Run asks whether the API server applies shard selectors before it takes
// buckets: with a source that does not, every bucket's store is a view of
// the store of the whole spec (here a module's too, synced before any
// bucket is taken), and the sharded store reads and hears every object
// once, through its buckets, each readable when it is heard.
func TestShardsRunWhereShardSelectorsAreIgnored(t *testing.T) {
	cfg := testenv.Config(t)
	cfg.QPS = -1
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "fxshard", testenv.DeleteAtEnd)

	objs := make([]client.Object, 50)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: fmt.Sprintf("cm-%d", i), UID: uuid.NewUUID()}}
	}
	src := fxstoretest.NewSource(clientgoscheme.Scheme, objs...)
	src.IgnoreShardSelectors()
	reg := fxstore.NewRegistry(clientgoscheme.Scheme)
	shards, err := fxshard.NewShards(reg, kube, fxshard.Config{Namespace: ns, Name: "app", Identity: "only",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond})
	require.NoError(t, err)
	byParity := fxstore.WithIndex("parity", func(cm *corev1.ConfigMap) []string {
		if n, _ := strconv.Atoi(strings.TrimPrefix(cm.Name, "cm-")); n%2 == 1 {
			return []string{"odd"}
		}
		return []string{"even"}
	})
	store, err := fxshard.For[*corev1.ConfigMap](shards, fxstore.Spec{}, fxstore.ShardByUID, byParity)
	require.NoError(t, err)
	whole, err := fxstore.For[*corev1.ConfigMap](reg, fxstore.Spec{}, fxstore.WithConsumer("a module"), byParity)
	require.NoError(t, err)
	// What a handler hears is readable then: a controller reads the
	// object to tell its bucket.
	var added, unreadable atomic.Int64
	_, err = store.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		added.Add(1)
		if cm := obj.(*corev1.ConfigMap); func() error { _, err := store.Get(cm.Namespace, cm.Name); return err }() != nil {
			unreadable.Add(1)
		}
	}})
	require.NoError(t, err)
	fxstoretest.Start(t, reg, src)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- shards.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	require.Eventually(t, func() bool {
		n, err := store.Count()
		return len(store.Buckets()) == fxshard.DefaultBuckets && store.HasSynced() && err == nil && n == len(objs)
	}, 20*time.Second, 50*time.Millisecond, "the one replica holds every bucket, and every object once")
	require.Eventually(t, func() bool { return added.Load() == int64(len(objs)) }, 5*time.Second, 10*time.Millisecond, "the handler heard each object once")
	assert.Zero(t, unreadable.Load(), "objects heard before their bucket's store could be read")

	informers := 0
	for _, info := range reg.Stores() {
		if info.ViewOf == nil {
			informers++
			assert.Empty(t, info.Key.Shard, "the one informer is the whole spec's")
			continue
		}
		assert.True(t, info.Status.ShardOnClient, "%s", info.Key)
	}
	assert.Equal(t, 1, informers)
	for _, o := range objs {
		got, err := store.Get(o.GetNamespace(), o.GetName())
		require.NoError(t, err)
		assert.Equal(t, o.GetUID(), got.UID)
	}
	// A reconciler written against fxstore.Reader reads the sharded
	// store, holding every bucket here, as the store of the whole spec.
	for _, r := range []fxstore.Reader[*corev1.ConfigMap]{whole, store} {
		n, err := r.Count()
		require.NoError(t, err)
		assert.Equal(t, len(objs), n, "%T", r)
		all, err := r.List(client.InNamespace("a"))
		require.NoError(t, err)
		assert.Len(t, all, len(objs), "%T", r)
		odd, err := r.ByIndex("parity", "odd")
		require.NoError(t, err)
		assert.Len(t, odd, len(objs)/2, "%T", r)
		got, err := r.Get("a", "cm-7")
		require.NoError(t, err)
		assert.Equal(t, objs[7].GetUID(), got.UID, "%T", r)
		_, err = r.Get("a", "missing")
		assert.True(t, apierrors.IsNotFound(err), "%T: %v", r, err)
	}
	assert.Equal(t, int64(len(objs)), added.Load(), "no object heard twice")
}

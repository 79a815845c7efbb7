package fxshard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

// The "shards" readiness check fails until the replica is in its group (it
// holds no bucket before, which says nothing of its share), passes once it
// is and its buckets' stores have synced, and fails again once the replica
// leaves. An app without sharded stores is ready at once.
func TestReadinessWaitsForTheGroup(t *testing.T) {
	kube, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "fxshard", testenv.DeleteAtEnd)
	newShards := func(reg *fxstore.Registry) *Shards {
		s, err := NewShards(reg, kube, Config{Namespace: ns, Name: "app", Identity: "only",
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod})
		require.NoError(t, err)
		return s
	}
	check := func(s *Shards) error { return readiness(s).Checker(nil) }

	t.Run("without sharded stores", func(t *testing.T) {
		assert.NoError(t, check(newShards(fxstore.NewRegistry(clientgoscheme.Scheme))))
	})

	objs := make([]client.Object, 20)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: fmt.Sprintf("cm-%d", i), UID: uuid.NewUUID()}}
	}
	reg := fxstore.NewRegistry(clientgoscheme.Scheme)
	shards := newShards(reg)
	store, err := For[*corev1.ConfigMap](shards, fxstore.Spec{}, fxstore.ShardByUID)
	require.NoError(t, err)
	fxstoretest.Start(t, reg, fxstoretest.NewSource(clientgoscheme.Scheme, objs...))
	require.ErrorContains(t, check(shards), "not in group "+ns+"/app yet: this replica has not taken its share of the buckets")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- shards.Run(ctx) }()
	require.Eventually(t, func() bool { return check(shards) == nil }, 20*time.Second, 20*time.Millisecond, "ready once in the group with its buckets' stores synced")
	require.Eventually(t, func() bool {
		n, err := store.Count()
		return len(store.Buckets()) == DefaultBuckets && err == nil && n == len(objs)
	}, 20*time.Second, 20*time.Millisecond, "its share, alone in the group: every bucket, every object")
	assert.NoError(t, check(shards), "still ready with every bucket")

	cancel()
	require.NoError(t, <-done)
	assert.ErrorContains(t, check(shards), "not in group", "not ready once it has left")
}

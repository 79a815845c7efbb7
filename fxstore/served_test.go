package fxstore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/storehooks"
)

var kindHooks = storehooks.Get[*fxstore.Registry, fxstore.Key, fxstore.Spec, fxstore.Option]()

// unservedSource is a Source whose kinds are not served until served is
// set, as an API server without a CRD.
type unservedSource struct {
	*fxstoretest.Source
	served atomic.Bool
}

func (s *unservedSource) Bind(ctx context.Context, key fxstore.Key) (fxstore.Binding, error) {
	if !s.served.Load() {
		return fxstore.Binding{}, &meta.NoKindMatchError{GroupKind: key.Kind.GroupKind(), SearchedVersions: []string{key.Kind.Version}}
	}
	return s.Source.Bind(ctx, key)
}

func TestStoreWaitsForItsKind(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}}
	src := &unservedSource{Source: fxstoretest.NewSource(clientgoscheme.Scheme, cm)}
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	s, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.WithConsumer("waiter"),
		fxstore.WithIndex("name", func(cm *corev1.ConfigMap) []string { return []string{cm.Name} }))
	require.NoError(t, err)
	kindHooks.WaitForKind(r, []string{"waiter"})

	require.NoError(t, r.Start(t.Context(), src), "a kind not served does not fail the start of a store that waits for it")
	t.Cleanup(r.Stop)
	require.NoError(t, r.WaitForSync(t.Context()), "nor its sync")
	assert.True(t, kindHooks.WaitingForKind(r, s.Key()))
	assert.True(t, r.Stores()[0].Status.WaitingForKind)
	_, err = s.Get("default", "a")
	require.ErrorIs(t, err, fxstore.ErrNotSynced)

	_, err = kindHooks.Serve(t.Context(), r, s.Key())
	require.Error(t, err, "serve fails while the kind is not served")
	src.served.Store(true)
	for cycle := range 3 {
		release, err := kindHooks.Serve(t.Context(), r, s.Key())
		require.NoError(t, err)
		require.NoError(t, r.WaitForStore(t.Context(), s.Key()), "cycle %d", cycle)
		got, err := s.Get("default", "a")
		require.NoError(t, err)
		assert.Equal(t, "a", got.Name)
		byName, err := s.ByIndex("name", "a")
		require.NoError(t, err)
		assert.Len(t, byName, 1, "the store's indexes come back with it")
		assert.False(t, kindHooks.WaitingForKind(r, s.Key()))

		release()
		release() // once
		assert.True(t, kindHooks.WaitingForKind(r, s.Key()))
		assert.False(t, s.HasSynced())
		_, err = s.Get("default", "a")
		require.ErrorIs(t, err, fxstore.ErrNotSynced, "a store given back holds nothing")
	}
}

func TestStoreAnotherNeedsDoesNotWait(t *testing.T) {
	src := &unservedSource{Source: fxstoretest.NewSource(clientgoscheme.Scheme)}
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.WithConsumer("waiter"))
	require.NoError(t, err)
	_, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "web"}, fxstore.WithConsumer("other"))
	require.NoError(t, err)
	kindHooks.WaitForKind(r, []string{"waiter"})
	err = r.Start(t.Context(), src)
	require.Error(t, err, "a kind another consumer needs must be served at start")
	assert.True(t, meta.IsNoMatchError(err))
}

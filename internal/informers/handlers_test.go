package informers_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/fxkube/fxkube/internal/informers"
)

// A move takes a tracked handler from one informer to another and tells
// it only what changed between them: changes made while it is paused
// reach it as one event each, unchanged objects as none. Afterwards it
// hears the new informer.
func TestHandlersMoveTellsOnlyWhatChanged(t *testing.T) {
	objs := func() []*corev1.ConfigMap {
		return []*corev1.ConfigMap{configMap("a", "x", "", "1"), configMap("a", "y", "", "1"), configMap("a", "z", "", "1")}
	}
	// Each source counts resourceVersions from the same start: the same
	// objects have the same versions in both.
	from := newFakeInformer(t, nil, objs()...)
	to := newFakeInformer(t, nil, objs()...)
	from.start(t)
	to.start(t)
	var current cache.SharedIndexInformer = from
	track := true
	hs := informers.NewHandlers("store", func() cache.SharedIndexInformer { return current }, func() bool { return track })
	rec := &recorder{}
	reg, err := hs.Add(rec, cache.HandlerOptions{})
	require.NoError(t, err)
	rec.waitLen(t, 3)
	require.Eventually(t, reg.HasSynced, wait, time.Millisecond)
	require.True(t, hs.CanMove())

	err = hs.Move(t.Context(), to, func() bool {
		// While the handler is paused: only the move tells it.
		to.change(t, func(s *fcache.FakeControllerSource) { s.Modify(configMap("a", "y", "", "2")) })
		to.change(t, func(s *fcache.FakeControllerSource) { s.Delete(configMap("a", "z", "", "1")) })
		to.change(t, func(s *fcache.FakeControllerSource) { s.Add(configMap("a", "w", "", "1")) })
		current = to
		return true
	})
	require.NoError(t, err)
	moved := rec.all()[3:]
	assert.ElementsMatch(t, []string{
		"update a/y v=1 -> a/y v=2",
		"delete a/z v=1",
		"add a/w v=1 initial=false",
	}, moved, "one event for each change, none for a/x")

	to.change(t, func(s *fcache.FakeControllerSource) { s.Modify(configMap("a", "x", "", "2")) })
	from.change(t, func(s *fcache.FakeControllerSource) { s.Modify(configMap("a", "x", "", "3")) })
	rec.waitFor(t, "update a/x v=1 -> a/x v=2")
	assert.NotContains(t, rec.all(), "update a/x v=1 -> a/x v=3", "it left the old informer")
	assert.True(t, reg.HasSynced())

	// A handler that is not tracked cannot move.
	track = false
	plain, err := hs.Add(&recorder{}, cache.HandlerOptions{})
	require.NoError(t, err)
	assert.False(t, hs.CanMove())
	require.ErrorIs(t, hs.Move(t.Context(), from, func() bool { return true }), informers.ErrNotMoved)
	require.NoError(t, hs.Remove(plain))
	require.NoError(t, hs.Remove(plain), "removing again does nothing")
	assert.True(t, hs.CanMove())
	require.NoError(t, hs.Remove(reg))
}

// A move that gives up (swap says false) leaves the handler where it was,
// told what it missed while paused.
func TestHandlersMoveGivenUpStays(t *testing.T) {
	from := newFakeInformer(t, nil, configMap("a", "x", "", "1"))
	from.start(t)
	to := newFakeInformer(t, nil)
	to.start(t)
	hs := informers.NewHandlers("store", func() cache.SharedIndexInformer { return from }, func() bool { return true })
	rec := &recorder{}
	_, err := hs.Add(rec, cache.HandlerOptions{})
	require.NoError(t, err)
	rec.waitLen(t, 1)
	err = hs.Move(t.Context(), to, func() bool {
		from.change(t, func(s *fcache.FakeControllerSource) { s.Modify(configMap("a", "x", "", "2")) })
		return false
	})
	require.ErrorIs(t, err, informers.ErrNotMoved)
	assert.Equal(t, []string{"add a/x v=1 initial=true", "update a/x v=1 -> a/x v=2"}, rec.all())
}

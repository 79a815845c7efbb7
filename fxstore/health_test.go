package fxstore_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

// A store whose list and watch fail says so (Err, Status, its health
// handlers, its views'), keeps serving what it held, and works again once
// they do.
func TestStoreHealth(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	all, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	inA, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a"})
	require.NoError(t, err)
	src := fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("a", "x"))
	fxstoretest.Start(t, r, src)
	require.NotNil(t, r.Stores()[1].ViewOf, "the store of namespace a is a view")

	var allHeard, inAHeard testenv.Records[error]
	_, err = all.Subscribe(fxstore.HandlerFuncs[*corev1.ConfigMap]{HealthFunc: allHeard.Add})
	require.NoError(t, err)
	sub, err := inA.Subscribe(fxstore.HandlerFuncs[*corev1.ConfigMap]{HealthFunc: inAHeard.Add})
	require.NoError(t, err)
	require.NoError(t, all.Err())
	require.NoError(t, inA.Err())

	t.Run("routine watch ends are not failures", func(t *testing.T) {
		restore := src.Fail(io.EOF)
		// The reflector may back off before it lists again (see below).
		require.Eventually(t, func() bool { return errors.Is(r.Stores()[0].Status.LastError, io.EOF) }, time.Minute, 10*time.Millisecond,
			"the watch ended")
		restore()
		assert.NoError(t, all.Err())
		assert.Empty(t, allHeard.All())
	})

	forbidden := apierrors.NewForbidden(corev1.Resource("configmaps"), "", errors.New("access revoked"))
	begin := time.Now()
	restore := src.Fail(forbidden)
	// A watch that ends within a second of its start makes client-go's
	// reflector back off before it lists again (up to 30 s).
	require.Eventually(t, func() bool { return all.Err() != nil }, time.Minute, 10*time.Millisecond)
	require.Error(t, inA.Err(), "a view fails with the store it is a view of")
	assert.ErrorContains(t, all.Err(), "store ConfigMap/v1 (all namespaces): failing since")
	assert.ErrorContains(t, inA.Err(), `store ConfigMap/v1 (namespace "a"): failing since`)
	assert.True(t, apierrors.IsForbidden(inA.Err()))
	var failing *fxstore.FailingError
	require.ErrorAs(t, all.Err(), &failing)
	assert.WithinRange(t, failing.Since, begin, time.Now())
	for _, s := range r.Stores() {
		assert.Equal(t, failing.Since, s.Status.FailingSince, "%s", s.Key)
		assert.True(t, apierrors.IsForbidden(s.Status.LastError), "%s: %v", s.Key, s.Status.LastError)
	}
	_, err = inA.Get("a", "x")
	assert.NoError(t, err, "a failing store serves what it held")

	restore()
	require.Eventually(t, func() bool { return all.Err() == nil }, time.Minute, 10*time.Millisecond, "the store works again")
	assert.NoError(t, inA.Err())
	for _, s := range r.Stores() {
		assert.Zero(t, s.Status.FailingSince, "%s", s.Key)
	}

	for name, h := range map[string]*testenv.Records[error]{"all": &allHeard, "a": &inAHeard} {
		got := h.All()
		if assert.Len(t, got, 2, "%s: failing, then working, once each: %v", name, got) {
			assert.True(t, apierrors.IsForbidden(got[0]), "%s: %v", name, got[0])
			assert.NoError(t, got[1], name)
		}
	}

	require.NoError(t, sub.Unsubscribe())
	restore = src.Fail(forbidden)
	defer restore()
	require.Eventually(t, func() bool { return all.Err() != nil }, time.Minute, 10*time.Millisecond)
	assert.Len(t, inAHeard.All(), 2, "an unsubscribed handler hears nothing more")
}

// A store that begins to fail with an error that does not say why (a
// timeout) is diagnosed with a plain list of one object, once per
// failure, before the failure is announced, and no longer than the
// registry runs.
func TestFailureThatDoesNotSayWhyIsDiagnosed(t *testing.T) {
	timeout := apierrors.NewTimeoutError("Too large resource version: 12, current: 10", 1)
	webhookDown := errors.New(`conversion webhook for example.io/v1, Kind=Widget failed: Post "https://webhook.example:9443/convert": connect: connection refused`)
	start := func(t *testing.T, check func(context.Context, fxstore.Key) error) (*fxstore.Registry, *fxstore.Store[*corev1.ConfigMap], *fxstoretest.Source) {
		t.Helper()
		r := fxstore.NewRegistry(clientgoscheme.Scheme)
		s, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
		require.NoError(t, err)
		src := fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("a", "x"))
		require.NoError(t, r.Start(t.Context(), fxstore.WithListCheck(src, check)))
		t.Cleanup(r.Stop)
		require.NoError(t, r.WaitForSync(t.Context()))
		return r, s, src
	}

	t.Run("the plain list says why", func(t *testing.T) {
		var diagnoses atomic.Int32
		r, s, src := start(t, func(context.Context, fxstore.Key) error {
			diagnoses.Add(1)
			return webhookDown
		})
		var heard testenv.Records[error]
		_, err := s.Subscribe(fxstore.HandlerFuncs[*corev1.ConfigMap]{HealthFunc: heard.Add})
		require.NoError(t, err)

		restore := src.Fail(timeout)
		require.Eventually(t, func() bool { return s.Err() != nil }, time.Minute, 10*time.Millisecond)
		assert.ErrorContains(t, s.Err(), "Too large resource version: 12, current: 10; a plain list of one object says why: "+webhookDown.Error())
		assert.True(t, apierrors.IsTimeout(s.Err()), "the store's own error is kept: %v", s.Err())
		assert.ErrorIs(t, r.Stores()[0].Status.LastError, webhookDown)
		got := heard.All()
		require.Len(t, got, 1)
		assert.ErrorIs(t, got[0], webhookDown, "the handler hears the diagnosis")

		restore()
		require.Eventually(t, func() bool { return s.Err() == nil }, time.Minute, 10*time.Millisecond, "the store works again")
		assert.NoError(t, r.Stores()[0].Status.LastError)
		// Handlers hear the transition after the store has made it.
		require.Eventually(t, func() bool { return len(heard.All()) == 2 }, 10*time.Second, 10*time.Millisecond, "failing, then working")
		assert.Equal(t, int32(1), diagnoses.Load(), "one diagnosis per failure")
	})

	t.Run("the diagnosis ends with the registry", func(t *testing.T) {
		listing := make(chan struct{})
		var ended testenv.Records[error]
		r, s, src := start(t, func(ctx context.Context, _ fxstore.Key) error {
			close(listing)
			<-ctx.Done() // an API server that does not answer
			ended.Add(ctx.Err())
			return ctx.Err()
		})
		restore := src.Fail(timeout)
		defer restore()
		select {
		case <-listing:
		case <-time.After(time.Minute):
			t.Fatal("the failure is not diagnosed")
		}
		assert.NoError(t, s.Err(), "a failure is not announced before it is diagnosed")
		begin := time.Now()
		r.Stop()
		assert.Less(t, time.Since(begin), time.Second, "Stop does not wait for the diagnosis's bound")
		assert.Equal(t, []error{context.Canceled}, ended.All())
		assert.NoError(t, s.Err(), "nor announced once the store stops")
	})
}

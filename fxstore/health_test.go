package fxstore_test

import (
	"errors"
	"io"
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
	src := fxstoretest.NewSource(clientgoscheme.Scheme, configMap("a", "x", nil, nil))
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
		require.Eventually(t, func() bool { return errors.Is(r.Stores()[0].Status.LastError, io.EOF) }, 10*time.Second, 10*time.Millisecond,
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

package fxstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
)

// A store whose watch ends on error events, as when the conversion webhook
// of its kind fails, is failing once, not once per watch the API server
// accepts and ends again. It says why through a plain list, and recovers
// once a watch delivers events again, with what was made meanwhile.
func TestStoreFailsOnWatchErrorEvents(t *testing.T) {
	src := newErrorEventSource(testenv.ConfigMap("a", "before"))
	webhookDown := errors.New(`conversion webhook for example.io/v1, Kind=Widget failed: Post "https://webhook.example:9443/convert": connect: connection refused`)
	var diagnoses atomic.Int32
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	s, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	require.NoError(t, r.Start(t.Context(), fxstore.WithListCheck(src, func(context.Context, fxstore.Key) error {
		diagnoses.Add(1)
		return webhookDown
	})))
	defer r.Stop()
	require.NoError(t, r.WaitForSync(t.Context()))
	var heard testenv.Records[error]
	_, err = s.Subscribe(fxstore.HandlerFuncs[*corev1.ConfigMap]{HealthFunc: heard.Add})
	require.NoError(t, err)

	t.Run("routine error events are not failures", func(t *testing.T) {
		tests := []struct {
			give string
			err  *apierrors.StatusError
		}{
			{"expired", apierrors.NewResourceExpired("too old resource version: 1 (2)")},
			{"stream broken on the client", brokenStream()},
		}
		for _, tt := range tests {
			watches := src.watchCount()
			src.endWatches(tt.err)
			require.Eventually(t, func() bool { return src.watchCount() > watches }, 10*time.Second, 10*time.Millisecond,
				"%s: the store watches again", tt.give)
			assert.NoError(t, s.Err(), tt.give)
			assert.NoError(t, r.Stores()[0].Status.LastError, tt.give)
		}
		assert.Empty(t, heard.All())
	})

	begin := time.Now()
	src.setFailing(tooLargeResourceVersion())
	require.Eventually(t, func() bool { return s.Err() != nil }, 10*time.Second, 10*time.Millisecond, "the store fails")
	assert.True(t, apierrors.IsTimeout(s.Err()), "%v", s.Err())
	assert.ErrorContains(t, s.Err(), "Too large resource version")
	assert.ErrorContains(t, s.Err(), "a plain list of one object says why: "+webhookDown.Error())
	var failing *fxstore.FailingError
	require.ErrorAs(t, s.Err(), &failing)
	assert.WithinRange(t, failing.Since, begin, time.Now())
	status := r.Stores()[0].Status
	assert.Equal(t, failing.Since, status.FailingSince)
	assert.ErrorIs(t, status.LastError, webhookDown)

	// The API server accepts each watch, then ends it with an error event.
	accepted := src.watchCount()
	require.Eventually(t, func() bool { return src.watchCount() >= accepted+5 }, 10*time.Second, 10*time.Millisecond,
		"the store watches again, and again")
	assert.Error(t, s.Err(), "an accepted watch is no recovery")
	assert.Len(t, heard.All(), 1, "failing is heard once, not once per watch")
	assert.Equal(t, int32(1), diagnoses.Load(), "diagnosed once per failure")

	src.add(testenv.ConfigMap("a", "meanwhile"))
	src.setFailing(nil)
	require.Eventually(t, func() bool { return s.Err() == nil }, 10*time.Second, 10*time.Millisecond, "the store recovers")
	// Recovered is when the source answers; its list reaches the store
	// a moment later.
	require.Eventually(t, func() bool { _, err := s.Get("a", "meanwhile"); return err == nil }, 10*time.Second, 10*time.Millisecond,
		"with what was made meanwhile")
	assert.NoError(t, r.Stores()[0].Status.LastError)
	got := heard.All()
	require.Len(t, got, 2, "failing, then recovered, once each: %v", got)
	assert.ErrorIs(t, got[0], webhookDown)
	assert.NoError(t, got[1])
}

// tooLargeResourceVersion is the error event kube-apiserver ends a watch
// with when its watch cache cannot catch up, such as when it cannot
// decode objects as their conversion webhook fails.
func tooLargeResourceVersion() *apierrors.StatusError {
	err := apierrors.NewTimeoutError("Too large resource version: 12, current: 10", 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// brokenStream is the error event client-go makes of a watch stream it
// cannot read.
func brokenStream() *apierrors.StatusError {
	err := apierrors.NewInternalError(errors.New("unable to decode an event from the watch stream: http2: response body closed"))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: "ClientWatchDecoding"})
	return err
}

// errorEventSource serves ConfigMaps as kube-apiserver does to a
// reflector that streams its lists (watch-list). While failing, it accepts
// each watch after a moment, then ends it with an error event.
type errorEventSource struct {
	mu      sync.Mutex
	objs    []*corev1.ConfigMap
	rv      int
	failing *apierrors.StatusError
	open    []*watch.RaceFreeFakeWatcher
	watches int // accepted so far
}

var _ cache.ListerWatcherWithContext = (*errorEventSource)(nil)

func newErrorEventSource(objs ...*corev1.ConfigMap) *errorEventSource {
	s := &errorEventSource{}
	for _, o := range objs {
		s.add(o)
	}
	return s
}

func (s *errorEventSource) Bind(context.Context, fxstore.Key) (fxstore.Binding, error) {
	return fxstore.Binding{ListerWatcher: s, Resource: corev1.Resource("configmaps")}, nil
}

// add stores obj, and sends it to the watches open.
func (s *errorEventSource) add(obj *corev1.ConfigMap) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	obj.ResourceVersion = strconv.Itoa(s.rv)
	s.objs = append(s.objs, obj)
	for _, w := range s.open {
		w.Add(obj.DeepCopy())
	}
}

// setFailing makes the source end the watches open, and each watch it
// accepts, with err; nil lets them work.
func (s *errorEventSource) setFailing(err *apierrors.StatusError) {
	s.mu.Lock()
	s.failing = err
	s.mu.Unlock()
	if err != nil {
		s.endWatches(err)
	}
}

// endWatches ends the watches open with err as an error event.
func (s *errorEventSource) endWatches(err *apierrors.StatusError) {
	s.mu.Lock()
	open := s.open
	s.open = nil
	s.mu.Unlock()
	for _, w := range open {
		w.Error(&err.ErrStatus)
	}
}

func (s *errorEventSource) watchCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watches
}

func (s *errorEventSource) List(opts metav1.ListOptions) (k8sruntime.Object, error) {
	return s.ListWithContext(context.Background(), opts)
}

func (s *errorEventSource) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return s.WatchWithContext(context.Background(), opts)
}

// ListWithContext fails: a reflector streaming its lists lists only when
// streaming fails otherwise.
func (s *errorEventSource) ListWithContext(context.Context, metav1.ListOptions) (k8sruntime.Object, error) {
	return nil, apierrors.NewServiceUnavailable("errorEventSource serves streamed lists only")
}

func (s *errorEventSource) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	// kube-apiserver waits for its watch cache before it answers.
	select {
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watches++
	w := watch.NewRaceFreeFake()
	if s.failing != nil {
		w.Error(&s.failing.ErrStatus)
		return w, nil
	}
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		for _, o := range s.objs {
			w.Add(o.DeepCopy())
		}
		end := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: strconv.Itoa(s.rv),
			Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		}}
		w.Action(watch.Bookmark, end)
	}
	s.open = append(s.open, w)
	return w, nil
}

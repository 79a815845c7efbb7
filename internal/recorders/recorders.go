// Package recorders sends the Events of a cluster's event recorders to its
// API server, as controller-runtime's manager does: events.k8s.io/v1 and,
// for code written against it, core/v1.
package recorders

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/fxkube/fxkube/connection"
)

// Broadcasting sends the events of every recorder it gives out to one sink,
// through client-go event broadcasters that run from start to stop, as
// controller-runtime's manager does. Each broadcaster (events.k8s.io/v1 and
// core/v1) is made on the first event of its API, as the manager makes its
// own on the first recorder asked for: an app that records no events holds
// neither broadcaster's queue. Events recorded while it is not running are
// dropped.
type Broadcasting struct {
	sink       events.EventSink
	coreEvents corev1client.EventInterface
	scheme     *k8sruntime.Scheme
	log        logr.Logger

	mu          sync.RWMutex
	ctx         context.Context // nil unless running
	cancel      context.CancelFunc
	broadcaster events.EventBroadcaster // made on the first event while running
	core        record.EventBroadcaster // the same, for core/v1 Events
	stopLogging func()
}

var _ recorder.Provider = (*Broadcasting)(nil)

// New returns the recorders of the cluster conn connects to, which send
// nothing until Start.
func New(conn *connection.Connection, scheme *k8sruntime.Scheme, log logr.Logger) (*Broadcasting, error) {
	c, err := eventsv1client.NewForConfigAndClient(conn.Config, conn.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("events client for %s: %w", conn.Config.Host, err)
	}
	core, err := corev1client.NewForConfigAndClient(conn.Config, conn.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("events client for %s: %w", conn.Config.Host, err)
	}
	sink := &events.EventSinkImpl{Interface: c}
	return &Broadcasting{sink: stoppingSink{EventSink: sink, log: log}, coreEvents: core.Events(""), scheme: scheme, log: log}, nil
}

// Start lets events be sent, from the first event of each API on.
func (b *Broadcasting) Start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithCancel(logr.NewContext(context.Background(), b.log))
	}
}

// Stop shuts the broadcasters down. Events still being written are
// abandoned, as controller-runtime's manager does, and said so at debug
// level (see stoppingSink).
func (b *Broadcasting) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return
	}
	if b.broadcaster != nil {
		b.broadcaster.Shutdown()
		b.stopLogging()
	}
	if b.core != nil {
		b.core.Shutdown()
	}
	b.cancel()
	b.ctx, b.broadcaster, b.core = nil, nil, nil
}

// newEventsBroadcaster makes the events.k8s.io/v1 broadcaster; b.mu is held.
func (b *Broadcasting) newEventsBroadcaster() (events.EventBroadcaster, error) {
	broadcaster := events.NewBroadcaster(b.sink)
	if err := broadcaster.StartRecordingToSinkWithContext(b.ctx); err != nil {
		broadcaster.Shutdown()
		return nil, fmt.Errorf("start recording events: %w", err)
	}
	stopLogging, err := broadcaster.StartLogging(b.log.V(1))
	if err != nil {
		broadcaster.Shutdown()
		return nil, fmt.Errorf("start logging events: %w", err)
	}
	b.stopLogging = stopLogging
	return broadcaster, nil
}

// newCoreBroadcaster makes the core/v1 broadcaster; b.mu is held.
func (b *Broadcasting) newCoreBroadcaster() (record.EventBroadcaster, error) {
	core := record.NewBroadcaster(record.WithContext(b.ctx))
	core.StartRecordingToSink(coreSink{events: b.coreEvents, ctx: b.ctx, log: b.log})
	return core, nil
}

// stoppingSink sends events.k8s.io/v1 Events. A write cut short by the
// app's stop (its context ended) drops its event, logged at debug level:
// client-go's broadcaster would log the write's "context canceled" as an
// error and retry it, for an event nobody waits for any more.
type stoppingSink struct {
	events.EventSink
	log logr.Logger
}

var _ events.EventSink = stoppingSink{}

// Create implements events.EventSink.
func (s stoppingSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	got, err := s.EventSink.Create(ctx, e)
	return droppedAtStop(ctx, s.log, e, got, err, e.Reason)
}

// Update implements events.EventSink.
func (s stoppingSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	got, err := s.EventSink.Update(ctx, e)
	return droppedAtStop(ctx, s.log, e, got, err, e.Reason)
}

// Patch implements events.EventSink.
func (s stoppingSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	got, err := s.EventSink.Patch(ctx, e, data)
	return droppedAtStop(ctx, s.log, e, got, err, e.Reason)
}

// coreSink sends core/v1 Events with ctx, the running broadcaster's, so
// that the app's stop ends the writes in flight, and drops the events
// they carried as stoppingSink does. (client-go's core/v1 sink writes
// with a context that never ends.)
type coreSink struct {
	events corev1client.EventInterface
	ctx    context.Context
	log    logr.Logger
}

var _ record.EventSink = coreSink{}

// Create implements record.EventSink.
func (s coreSink) Create(e *corev1.Event) (*corev1.Event, error) {
	got, err := s.events.CreateWithEventNamespaceWithContext(s.ctx, e)
	return droppedAtStop(s.ctx, s.log, e, got, err, e.Reason)
}

// Update implements record.EventSink.
func (s coreSink) Update(e *corev1.Event) (*corev1.Event, error) {
	got, err := s.events.UpdateWithEventNamespaceWithContext(s.ctx, e)
	return droppedAtStop(s.ctx, s.log, e, got, err, e.Reason)
}

// Patch implements record.EventSink.
func (s coreSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	got, err := s.events.PatchWithEventNamespaceWithContext(s.ctx, e, data)
	return droppedAtStop(s.ctx, s.log, e, got, err, e.Reason)
}

// droppedAtStop returns a write's result, unless the write failed because
// ctx ended, as the app stopped: then it logs the event as dropped, at
// debug level, and returns sent as written without an error, so that the
// broadcaster neither logs an error nor retries.
func droppedAtStop[E any](ctx context.Context, log logr.Logger, sent, got *E, err error, reason string) (*E, error) {
	if err == nil || ctx.Err() == nil {
		return got, err
	}
	log.V(1).Info("event not sent: the app stopped", "reason", reason, "error", err.Error())
	return sent, nil
}

// lazy is a recorder of a broadcaster of b, B, made on the first event
// while b runs, as R; a broadcaster made after a restart gets a new
// recorder.
type lazy[B comparable, R any] struct {
	b           *Broadcasting
	broadcaster *B                // b's field
	newB        func() (B, error) // makes *broadcaster; b.mu is held
	newR        func(B) R

	mu  sync.Mutex
	of  B
	rec R
}

// with calls fn with a recorder of the running broadcaster, if b runs. fn
// runs under b's read lock, so stop waits for it; broadcasters drop events
// when their queue is full, so fn does not block.
func (l *lazy[B, R]) with(fn func(R)) {
	var none B
	b := l.b
	b.mu.RLock()
	if *l.broadcaster == none && b.ctx != nil {
		b.mu.RUnlock()
		b.mu.Lock()
		if *l.broadcaster == none && b.ctx != nil {
			made, err := l.newB()
			if err != nil {
				b.log.Error(err, "Event dropped")
			}
			*l.broadcaster = made
		}
		b.mu.Unlock()
		b.mu.RLock()
	}
	defer b.mu.RUnlock()
	broadcaster := *l.broadcaster
	if broadcaster == none {
		return
	}
	l.mu.Lock()
	if l.of != broadcaster {
		l.of, l.rec = broadcaster, l.newR(broadcaster)
	}
	rec := l.rec
	l.mu.Unlock()
	fn(rec)
}

// GetEventRecorderFor implements recorder.Provider: it returns a recorder of
// core/v1 Events from component name, the deprecated API kubebuilder
// projects still use.
//
// Deprecated: use GetEventRecorder, as controller-runtime says.
func (b *Broadcasting) GetEventRecorderFor(name string) record.EventRecorder {
	return lazyCoreRecorder{&lazy[record.EventBroadcaster, record.EventRecorderLogger]{
		b: b, broadcaster: &b.core, newB: b.newCoreBroadcaster,
		newR: func(core record.EventBroadcaster) record.EventRecorderLogger {
			return core.NewRecorder(b.scheme, corev1.EventSource{Component: name})
		},
	}}
}

// lazyCoreRecorder records through the core/v1 broadcaster.
type lazyCoreRecorder struct {
	*lazy[record.EventBroadcaster, record.EventRecorderLogger]
}

// Event implements record.EventRecorder.
func (r lazyCoreRecorder) Event(obj k8sruntime.Object, eventtype, reason, message string) {
	r.with(func(rec record.EventRecorderLogger) { rec.Event(obj, eventtype, reason, message) })
}

// Eventf implements record.EventRecorder.
func (r lazyCoreRecorder) Eventf(obj k8sruntime.Object, eventtype, reason, format string, args ...any) {
	r.with(func(rec record.EventRecorderLogger) { rec.Eventf(obj, eventtype, reason, format, args...) })
}

// AnnotatedEventf implements record.EventRecorder.
func (r lazyCoreRecorder) AnnotatedEventf(obj k8sruntime.Object, annotations map[string]string, eventtype, reason, format string, args ...any) {
	r.with(func(rec record.EventRecorderLogger) {
		rec.AnnotatedEventf(obj, annotations, eventtype, reason, format, args...)
	})
}

// GetEventRecorder implements RecorderProvider.
func (b *Broadcasting) GetEventRecorder(name string) recorder.EventRecorder {
	return lazyRecorder{&lazy[events.EventBroadcaster, events.EventRecorderLogger]{
		b: b, broadcaster: &b.broadcaster, newB: b.newEventsBroadcaster,
		newR: func(broadcaster events.EventBroadcaster) events.EventRecorderLogger {
			return broadcaster.NewRecorder(b.scheme, name)
		},
	}}
}

// lazyRecorder records through the events.k8s.io/v1 broadcaster.
type lazyRecorder struct {
	*lazy[events.EventBroadcaster, events.EventRecorderLogger]
}

// Eventf implements events.EventRecorder.
func (r lazyRecorder) Eventf(regarding, related k8sruntime.Object, eventtype, reason, action, note string, args ...any) {
	r.with(func(rec events.EventRecorderLogger) {
		rec.Eventf(regarding, related, eventtype, reason, action, note, args...)
	})
}

// AnnotatedEventf implements events.AnnotatedEventRecorder.
func (r lazyRecorder) AnnotatedEventf(regarding, related k8sruntime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	r.with(func(rec events.EventRecorderLogger) {
		rec.(events.AnnotatedEventRecorder).AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, note, args...)
	})
}

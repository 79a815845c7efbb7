package fxcontroller

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/fxkube/fxkube/connection"
)

// RecorderProvider gives each controller its event recorder. It is
// controller-runtime's recorder.Provider without the deprecated core/v1
// recorder, so a controller-runtime manager is one too. Module provides one
// that sends events.k8s.io/v1 Events to the API server; fxcontrollertest
// provides one that keeps them in memory.
type RecorderProvider interface {
	// GetEventRecorder returns a recorder whose Events name name as their
	// reporting controller; pass the controller's name.
	GetEventRecorder(name string) recorder.EventRecorder
}

type recorderParams struct {
	fx.In

	Lifecycle fx.Lifecycle
	Conn      *connection.Connection
	Scheme    *k8sruntime.Scheme
	Logger    *zap.Logger `optional:"true"`
}

func newRecorderProvider(p recorderParams) (RecorderProvider, error) {
	c, err := eventsv1client.NewForConfigAndClient(p.Conn.Config, p.Conn.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("events client for %s: %w", p.Conn.Config.Host, err)
	}
	core, err := corev1client.NewForConfigAndClient(p.Conn.Config, p.Conn.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("events client for %s: %w", p.Conn.Config.Host, err)
	}
	log := zap.NewNop()
	if p.Logger != nil {
		log = p.Logger.Named("events")
	}
	b := newBroadcasting(&events.EventSinkImpl{Interface: c}, &corev1client.EventSinkImpl{Interface: core.Events("")}, p.Scheme, zapr.NewLogger(log))
	p.Lifecycle.Append(fx.StartStopHook(b.start, b.stop))
	return b, nil
}

// broadcasting sends the events of every recorder it gives out to one sink,
// through one client-go events broadcaster, which runs from start to stop, as
// controller-runtime's manager does. Events recorded while it is not running
// are dropped.
type broadcasting struct {
	sink     events.EventSink
	coreSink record.EventSink // nil: no core/v1 events
	scheme   *k8sruntime.Scheme
	log      logr.Logger

	mu          sync.RWMutex
	broadcaster events.EventBroadcaster // nil unless running
	core        record.EventBroadcaster // of core/v1 Events, with broadcaster
	cancel      context.CancelFunc
	stopLogging func()
}

var _ recorder.Provider = (*broadcasting)(nil)

func newBroadcasting(sink events.EventSink, coreSink record.EventSink, scheme *k8sruntime.Scheme, log logr.Logger) *broadcasting {
	return &broadcasting{sink: sink, coreSink: coreSink, scheme: scheme, log: log}
}

func (b *broadcasting) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.broadcaster != nil {
		return nil
	}
	broadcaster := events.NewBroadcaster(b.sink)
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), b.log))
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		cancel()
		broadcaster.Shutdown()
		return fmt.Errorf("start recording events: %w", err)
	}
	stopLogging, err := broadcaster.StartLogging(b.log.V(1))
	if err != nil {
		cancel()
		broadcaster.Shutdown()
		return fmt.Errorf("start logging events: %w", err)
	}
	b.broadcaster, b.cancel, b.stopLogging = broadcaster, cancel, stopLogging
	if b.coreSink != nil {
		b.core = record.NewBroadcaster(record.WithContext(ctx))
		b.core.StartRecordingToSink(b.coreSink)
	}
	return nil
}

// stop shuts the broadcaster down. Events still being written are abandoned,
// as controller-runtime's manager does.
func (b *broadcasting) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.broadcaster == nil {
		return
	}
	b.broadcaster.Shutdown()
	if b.core != nil {
		b.core.Shutdown()
	}
	b.stopLogging()
	b.cancel()
	b.broadcaster, b.core = nil, nil
}

// GetEventRecorderFor implements recorder.Provider: it returns a recorder of
// core/v1 Events from component name, the deprecated API kubebuilder
// projects still use.
//
// Deprecated: use GetEventRecorder, as controller-runtime says.
func (b *broadcasting) GetEventRecorderFor(name string) record.EventRecorder {
	return &lazyCoreRecorder{b: b, name: name}
}

// lazyCoreRecorder records through the core/v1 broadcaster running when an
// event comes.
type lazyCoreRecorder struct {
	b    *broadcasting
	name string

	mu  sync.Mutex
	of  record.EventBroadcaster
	rec record.EventRecorderLogger
}

func (r *lazyCoreRecorder) with(fn func(record.EventRecorderLogger)) {
	r.b.mu.RLock()
	defer r.b.mu.RUnlock()
	if r.b.core == nil {
		return
	}
	r.mu.Lock()
	if r.of != r.b.core {
		r.of, r.rec = r.b.core, r.b.core.NewRecorder(r.b.scheme, corev1.EventSource{Component: r.name})
	}
	rec := r.rec
	r.mu.Unlock()
	fn(rec)
}

// Event implements record.EventRecorder.
func (r *lazyCoreRecorder) Event(obj k8sruntime.Object, eventtype, reason, message string) {
	r.with(func(rec record.EventRecorderLogger) { rec.Event(obj, eventtype, reason, message) })
}

// Eventf implements record.EventRecorder.
func (r *lazyCoreRecorder) Eventf(obj k8sruntime.Object, eventtype, reason, format string, args ...any) {
	r.with(func(rec record.EventRecorderLogger) { rec.Eventf(obj, eventtype, reason, format, args...) })
}

// AnnotatedEventf implements record.EventRecorder.
func (r *lazyCoreRecorder) AnnotatedEventf(obj k8sruntime.Object, annotations map[string]string, eventtype, reason, format string, args ...any) {
	r.with(func(rec record.EventRecorderLogger) {
		rec.AnnotatedEventf(obj, annotations, eventtype, reason, format, args...)
	})
}

// GetEventRecorder implements RecorderProvider.
func (b *broadcasting) GetEventRecorder(name string) recorder.EventRecorder {
	return &lazyRecorder{b: b, name: name}
}

// lazyRecorder records through the broadcaster running when an event comes.
type lazyRecorder struct {
	b    *broadcasting
	name string

	mu  sync.Mutex
	of  events.EventBroadcaster
	rec events.EventRecorderLogger
}

// with calls fn with a recorder of the running broadcaster, if any.
func (r *lazyRecorder) with(fn func(events.EventRecorderLogger)) {
	r.b.mu.RLock()
	defer r.b.mu.RUnlock()
	if r.b.broadcaster == nil {
		return
	}
	r.mu.Lock()
	if r.of != r.b.broadcaster {
		r.of, r.rec = r.b.broadcaster, r.b.broadcaster.NewRecorder(r.b.scheme, r.name)
	}
	rec := r.rec
	r.mu.Unlock()
	fn(rec)
}

// Eventf implements events.EventRecorder.
func (r *lazyRecorder) Eventf(regarding, related k8sruntime.Object, eventtype, reason, action, note string, args ...any) {
	r.with(func(rec events.EventRecorderLogger) {
		rec.Eventf(regarding, related, eventtype, reason, action, note, args...)
	})
}

// AnnotatedEventf implements events.AnnotatedEventRecorder.
func (r *lazyRecorder) AnnotatedEventf(regarding, related k8sruntime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	r.with(func(rec events.EventRecorderLogger) {
		rec.(events.AnnotatedEventRecorder).AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, note, args...)
	})
}

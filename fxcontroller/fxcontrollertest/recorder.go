package fxcontrollertest

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/fxkube/fxkube/fxcontroller"
)

// Recorder is an fxcontroller.RecorderProvider that keeps the events of
// every recorder it gives out in memory. It is safe for concurrent use.
type Recorder struct {
	scheme *k8sruntime.Scheme

	mu     sync.Mutex
	events []Event
}

var (
	_ fxcontroller.RecorderProvider = (*Recorder)(nil)
	_ recorder.Provider             = (*Recorder)(nil)
)

// NewRecorder returns an empty Recorder that refers to typed objects through
// scheme.
func NewRecorder(scheme *k8sruntime.Scheme) *Recorder { return &Recorder{scheme: scheme} }

// Event is an event a reconciler recorded.
type Event struct {
	// Controller is the name the recorder was asked for with, which an
	// Event names as its reporting controller.
	Controller  string
	Regarding   corev1.ObjectReference
	Related     *corev1.ObjectReference
	Type        string // corev1.EventTypeNormal or corev1.EventTypeWarning
	Reason      string
	Action      string
	Note        string // formatted with the recorder's arguments
	Annotations map[string]string
}

// String describes the event as "Normal Annotated ConfigMap default/settings:
// note".
func (e Event) String() string {
	name := e.Regarding.Name
	if e.Regarding.Namespace != "" {
		name = e.Regarding.Namespace + "/" + name
	}
	return fmt.Sprintf("%s %s %s %s: %s", e.Type, e.Reason, e.Regarding.Kind, name, e.Note)
}

// Events returns the events recorded so far, in order.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// GetEventRecorder implements fxcontroller.RecorderProvider.
func (r *Recorder) GetEventRecorder(name string) recorder.EventRecorder {
	return &namedRecorder{r: r, name: name}
}

// GetEventRecorderFor implements controller-runtime's recorder.Provider: its
// core/v1 events are kept the same way, without an action.
//
// Deprecated: use GetEventRecorder, as controller-runtime says.
func (r *Recorder) GetEventRecorderFor(name string) record.EventRecorder {
	return &coreRecorder{r: r, name: name}
}

func (r *Recorder) record(name string, regarding, related k8sruntime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	e := Event{
		Controller:  name,
		Regarding:   r.reference(regarding),
		Type:        eventtype,
		Reason:      reason,
		Action:      action,
		Note:        fmt.Sprintf(note, args...),
		Annotations: maps.Clone(annotations),
	}
	if related != nil {
		ref := r.reference(related)
		e.Related = &ref
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// reference refers to obj as client-go's recorders do, or as well as it can.
func (r *Recorder) reference(obj k8sruntime.Object) corev1.ObjectReference {
	if ref, err := reference.GetReference(r.scheme, obj); err == nil {
		return *ref
	}
	return corev1.ObjectReference{Kind: fmt.Sprintf("%T", obj)}
}

type namedRecorder struct {
	r    *Recorder
	name string
}

func (n *namedRecorder) Eventf(regarding, related k8sruntime.Object, eventtype, reason, action, note string, args ...any) {
	n.r.record(n.name, regarding, related, nil, eventtype, reason, action, note, args...)
}

func (n *namedRecorder) AnnotatedEventf(regarding, related k8sruntime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	n.r.record(n.name, regarding, related, annotations, eventtype, reason, action, note, args...)
}

type coreRecorder struct {
	r    *Recorder
	name string
}

func (c *coreRecorder) Event(obj k8sruntime.Object, eventtype, reason, message string) {
	c.r.record(c.name, obj, nil, nil, eventtype, reason, "", "%s", message)
}

func (c *coreRecorder) Eventf(obj k8sruntime.Object, eventtype, reason, format string, args ...any) {
	c.r.record(c.name, obj, nil, nil, eventtype, reason, "", format, args...)
}

func (c *coreRecorder) AnnotatedEventf(obj k8sruntime.Object, annotations map[string]string, eventtype, reason, format string, args ...any) {
	c.r.record(c.name, obj, nil, annotations, eventtype, reason, "", format, args...)
}

package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// harness is what every system's controllers report to, so the same
// reconcile work is counted the same way in each.
type harness struct {
	controllers []module            // in the workload's order
	trackers    map[string]*tracker // by module name
	// gate, when set, holds every reconcile until it is closed: the burst
	// queues up behind it, so the drain that follows measures the
	// controllers, not how fast the API server takes writes.
	gate atomic.Pointer[chan struct{}]
}

func newHarness(controllers []module, objects int) *harness {
	h := &harness{controllers: controllers, trackers: make(map[string]*tracker)}
	for _, m := range controllers {
		h.trackers[m.name] = newTracker(m, objects)
	}
	return h
}

// wait blocks while the gate is closed.
func (h *harness) wait() {
	if g := h.gate.Load(); g != nil {
		<-*g
	}
}

// tracker follows one controller: which objects it has reconciled at the
// version the current round expects.
type tracker struct {
	module module
	seen   []atomic.Int32 // by object index: the last round it was counted in

	round    atomic.Int32 // rounds so far
	target   atomic.Int32 // the version this round waits for, or anyVersion
	pending  atomic.Int64 // objects not yet reconciled at target
	enqueued atomic.Int64 // update events at target that reached the queue
	done     atomic.Pointer[chan struct{}]
	doneAt   atomic.Int64 // unix nanoseconds when pending reached 0
	first    atomic.Int64 // unix nanoseconds of the first reconcile
}

// anyVersion is the target of the initial round: objects keep the versions
// earlier runs' bursts left them at.
const anyVersion = -1

func newTracker(m module, objects int) *tracker {
	return &tracker{module: m, seen: make([]atomic.Int32, objects)}
}

// expect starts a round: wait for count objects to be reconciled at version.
// Only call it while no reconcile at version can run.
func (t *tracker) expect(version int32, count int) {
	done := make(chan struct{})
	t.target.Store(version)
	t.enqueued.Store(0)
	t.doneAt.Store(0)
	t.pending.Store(int64(count))
	t.done.Store(&done)
	t.round.Add(1)
	if count == 0 {
		close(done)
	}
}

// reconciled records that the controller reconciled object i and saw it at
// version.
func (t *tracker) reconciled(i int, version int32) {
	now := time.Now().UnixNano()
	t.first.CompareAndSwap(0, now)
	if i < 0 || i >= len(t.seen) || version < 0 {
		return
	}
	if target := t.target.Load(); target != anyVersion && version != target {
		return
	}
	if round := t.round.Load(); t.seen[i].Swap(round) == round {
		return
	}
	if t.pending.Add(-1) == 0 {
		t.doneAt.Store(now)
		close(*t.done.Load())
	}
}

// updated records an update event on its way to the controller's queue.
func (t *tracker) updated(version int32) {
	if version == t.target.Load() {
		t.enqueued.Add(1)
	}
}

// waitDone blocks until the round is over.
func (t *tracker) waitDone(ctx context.Context) error {
	select {
	case <-*t.done.Load():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("controller %s: %d objects not reconciled at version %d: %w",
			t.module.name, t.pending.Load(), t.target.Load(), context.Cause(ctx))
	}
}

// reconcileConfigMap is the reconcile every system of the shared workload
// runs, given the three objects read from its own caches: it checks they
// belong together and reports the version it saw.
func (t *tracker) reconcileConfigMap(cm *corev1.ConfigMap, secret *corev1.Secret, deploy *appsv1.Deployment) {
	t.report(cm, cm != nil && secret != nil && deploy != nil && secret.Name == cm.Name && deploy.Name == cm.Name)
}

// report records a reconcile of cm, whose other reads found cm's objects
// (belong) or not, and the version it saw.
func (t *tracker) report(cm *corev1.ConfigMap, belong bool) {
	if cm == nil || !belong {
		t.reconciled(-1, -1)
		return
	}
	t.reconciled(indexOf(cm.Name), versionOf(cm))
}

// countUpdates is a predicate that passes everything and counts the update
// events at the round's version; controller-runtime and fxcontroller enqueue
// right after predicates pass.
func countUpdates[T client.Object](t *tracker) predicate.TypedFuncs[T] {
	return predicate.TypedFuncs[T]{
		UpdateFunc: func(e event.TypedUpdateEvent[T]) bool {
			if cm, ok := any(e.ObjectNew).(*corev1.ConfigMap); ok {
				t.updated(versionOf(cm))
			}
			return true
		},
	}
}

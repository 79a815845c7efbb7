package fxstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A store that waits for its kind is one that only controllers that wait
// for their kind asked for (fxcontroller.WhenServed): the consumers
// waitForKind names. If the API server does not serve its kind at Start,
// the store does not fail the start: it waits, not started. Its controllers
// start it with serve once the kind is served, and give it back when the
// kind goes: the last to give it back stops its informer, which drops its
// objects and closes its watch. The store itself, which its consumers
// hold, stays: serve starts it again with a new informer.
//
// A kind is waited for only when every store of it waits: a store of the
// kind anyone else needs must start, as before. Such stores keep
// informers of their own (no views), as each starts and stops with its
// kind.

// servedState is a store's state as one that waits for its kind.
type servedState struct {
	// optional is set at Start for a store that waits for its kind;
	// guarded by the registry's lock.
	optional bool
	// waiting is set while the store is not started: its kind was not
	// served, or it was given back.
	waiting atomic.Bool
	// mu orders serve and its releases; holders counts the serves not
	// given back.
	mu      sync.Mutex
	holders int
	// runDone is closed once the store's informer has stopped; guarded by
	// the registry's lock.
	runDone chan struct{}
}

// waitForKind records that the requests consumers make are for
// controllers that wait for their kind to be served. It must come before
// Start.
func (r *Registry) waitForKind(consumers []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waitsForKind == nil {
		r.waitsForKind = make(map[string]bool)
	}
	for _, c := range consumers {
		r.waitsForKind[c] = true
	}
}

// markWaitingForKindLocked marks, as Start begins, the stores that wait
// for their kind: those of the kinds no other consumer asked for. Each
// keeps an informer of its own. The registry's lock is held.
func (r *Registry) markWaitingForKindLocked() {
	if len(r.waitsForKind) == 0 {
		return
	}
	required := make(map[schema.GroupKind]bool)
	for _, e := range r.order {
		e.mu.Lock()
		for _, c := range e.consumers {
			if !r.waitsForKind[c] {
				required[e.key.Kind.GroupKind()] = true
			}
		}
		e.mu.Unlock()
	}
	for _, e := range r.order {
		if !required[e.key.Kind.GroupKind()] && e.key.Shard == "" {
			e.served.optional, e.pinned = true, true
		}
	}
}

// waitsForKind reports whether err, the store's bind error at Start, is
// one the store waits through: its kind is not served, and it waits for
// its kind. The store then waits, not started.
func (e *entry) waitsForKind(err error) bool {
	if !e.served.optional || !meta.IsNoMatchError(err) {
		return false
	}
	e.served.waiting.Store(true)
	e.registry.log.Info("store waits for its kind to be served; its controllers start once it is",
		zap.Stringer("store", e.key), zap.Strings("requestedBy", e.consumerNames()))
	return true
}

// consumerNames returns who asked for the store.
func (e *entry) consumerNames() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.consumers)
}

// runLocked runs the store's informer, bound already, and marks the store
// synced once it has synced. The registry's lock is held.
func (r *Registry) runLocked(e *entry) {
	ctx := e.runContext(r.runCtx)
	inf := e.informer // a store that waits for its kind gets a new one as it stops
	done := make(chan struct{})
	e.served.runDone = done
	r.wg.Go(func() {
		defer close(done)
		inf.RunWithContext(ctx)
	})
	r.wg.Go(func() { e.awaitSync(ctx, inf.HasSyncedChecker().Done()) })
}

// serve asks for the store of key to run, its kind being served: a store
// that waits for its kind starts, bound to the source again. Wait for it
// with WaitForStore. release gives it back, once: the last release of a
// store that waits for its kind stops it. A store that does not wait for
// its kind runs anyway, and release does nothing to it.
func (r *Registry) serve(ctx context.Context, key Key) (release func(), err error) {
	r.mu.Lock()
	e, ok := r.entries[key]
	src, started := r.src, r.started
	r.mu.Unlock()
	switch {
	case !ok:
		return nil, fmt.Errorf("fxstore: no store %s", key)
	case !started:
		return nil, fmt.Errorf("store %s: serve it once the registry has started", key)
	}
	e.served.mu.Lock()
	defer e.served.mu.Unlock()
	if e.served.waiting.Load() {
		b, err := src.Bind(ctx, key)
		if err != nil {
			return nil, &StoreError{Key: key, Err: err}
		}
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return nil, fmt.Errorf("store %s: the registry has stopped", key)
		}
		e.bind(b, time.Now())
		e.served.waiting.Store(false)
		r.runLocked(e)
		r.signalLocked()
		r.mu.Unlock()
		r.log.Info("store started: its kind is served", zap.Stringer("store", key))
	}
	e.served.holders++
	return sync.OnceFunc(func() { r.releaseServed(e) }), nil
}

// releaseServed gives back one serve of e; the last stops a store that
// waits for its kind, and readies it to start again.
func (r *Registry) releaseServed(e *entry) {
	e.served.mu.Lock()
	defer e.served.mu.Unlock()
	if e.served.holders--; e.served.holders > 0 {
		return
	}
	r.mu.Lock()
	if !e.served.optional || e.served.waiting.Load() || r.stopped || r.entries[e.key] != e {
		r.mu.Unlock()
		return
	}
	e.served.waiting.Store(true)
	e.synced.Store(false)
	e.syncedCh.Store(new(make(chan struct{})))
	stop, done := e.stop, e.served.runDone
	r.mu.Unlock()
	stop()
	<-done // the informer has stopped: nothing reads what renew replaces
	r.mu.Lock()
	e.renewLocked()
	r.released.Add(1)
	r.signalLocked()
	r.mu.Unlock()
	r.log.Info("store stopped: its kind is not served; its informer stops and its objects are dropped until it is again",
		zap.Stringer("store", e.key))
}

// renewLocked gives a store whose informer has stopped a new one, not
// started, with the store's indexes: an informer runs once. Its objects
// go with the old one. The registry's lock is held.
func (e *entry) renewLocked() {
	e.informer = e.newInformer()
	e.onInformer = make(map[string]string)
	indexes := slices.Collect(maps.Values(e.indexes))
	// The informer has not started, and has none of these names.
	_ = e.addInformerIndexes(indexNames(indexes), indexes, e.indexFunc)
	if e.asBytes {
		e.backed.Store(&backingRef{newHeldAsBytes(e)})
	} else {
		e.backed.Store(&backingRef{newOwnInformer(e)})
	}
	e.closeShared()
	e.lw.errorEvent.Store(false)
	e.mu.Lock()
	e.syncedIn, e.lastErr, e.failingSince, e.announced, e.diagnosis = 0, nil, time.Time{}, false, nil
	e.mu.Unlock()
}

// waitingForKind reports whether the store of key waits for its kind,
// not started.
func (r *Registry) waitingForKind(key Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[key]
	return ok && e.served.waiting.Load()
}

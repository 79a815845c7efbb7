package fxstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
)

// addLocked adds a new store to the registry and, after Start, starts it:
// as a view of a running store that covers it, or with an informer of its
// own. A sharded store whose kind's shard selectors the API server ignores
// (checkShardSelectors) is a view of the store of its whole spec. The registry's
// lock is held.
func (r *Registry) addLocked(e *entry) {
	r.entries[e.key] = e
	r.order = append(r.order, e)
	if !r.started {
		return
	}
	e.planned = true
	e.late = r.synced
	switch p := r.lateParent(e); {
	case p != nil && e.serveAsView(p):
		r.startView(e, p)
	case !r.serveShardFromWhole(e):
		r.startLate(e)
	}
	// WaitForSync waits for it too.
	r.signalLocked()
}

// startView starts e as a view of parent: synced once parent is, until
// e is dropped; at once when parent has synced already, as handlers added
// to e hear its objects at once, and may read them. e holds a request for
// parent, which a store made for shards would otherwise drop under it.
// The registry's lock is held.
func (r *Registry) startView(e, parent *entry) {
	parent.refs++ // released with e
	e.parent = parent
	if parent.views == nil {
		parent.views = make(map[*entry]struct{})
	}
	parent.views[e] = struct{}{}
	r.startedStores.Add(1)
	e.startedAt = time.Now()
	ctx := e.runContext(r.runCtx)
	if parent.synced.Load() {
		e.markSynced()
		r.signalLocked()
		return
	}
	r.wg.Go(func() { e.awaitSync(ctx, parent.syncedDone()) })
}

// serveShardFromWhole makes sharded store e, when the API server ignores
// its kind's shard selectors, a view of the store of its whole spec (made
// for it if no one asked for that spec), or of the broader store that one
// is a view of: one list and watch of every object, rather than one per
// shard, each receiving every object. Each such shard holds a request for
// the whole store, dropped with it. A whole store that could not start is
// started again: its shards wait for it, and report its error. It reports
// whether e is now such a view. The registry's lock is held.
func (r *Registry) serveShardFromWhole(e *entry) bool {
	if e.key.Shard == "" || !r.shardsIgnored[e.key.Kind.GroupKind()] || e.pinned {
		return false
	}
	wholeKey := e.key
	wholeKey.Shard = ""
	whole, ok := r.entries[wholeKey]
	switch {
	case !ok:
		whole = newEntry(wholeKey, e.example, e.transform, r)
		whole.consumers = []string{"fxstore, for the shards of this spec: the API server does not apply shard selectors"}
		r.addLocked(whole)
	default:
		r.retryLocked(whole)
	}
	parent := whole.root()
	if !e.serveAsView(parent) {
		if !ok {
			r.forgetLocked(whole)
		}
		return false
	}
	whole.refs++
	if whole.shardViews++; whole.shardViews == 1 {
		r.log.Warn("the API server does not apply shard selectors; the shards of this store are views of it, or of the broader store it is a view of, which receives and holds every object",
			zap.Stringer("store", wholeKey), zap.Stringer("informer", parent.key),
			zap.String("fix", "enable kube-apiserver's ShardedListAndWatch feature gate (alpha since Kubernetes 1.36)"))
	}
	e.whole = whole
	r.startView(e, parent)
	return true
}

// lateParent returns the broadest running store that covers e, a store
// requested after Start, to serve it as a view of; nil if none. The
// registry's lock is held.
func (r *Registry) lateParent(e *entry) *entry {
	if e.pinned {
		return nil
	}
	return broadestCover(e, r.order, func(b *entry) bool { return b.parent == nil && !b.emptying && b.bindFailure() == nil })
}

// startLate binds and runs a store requested after Start. The registry's
// lock is held.
func (r *Registry) startLate(e *entry) {
	if e.late {
		r.log.Info("store started late", zap.Stringer("store", e.key), zap.Strings("requestedBy", e.consumers))
	}
	ctx := e.runContext(r.runCtx)
	r.wg.Go(func() {
		b, err := r.src.Bind(ctx, e.key)
		switch {
		case ctx.Err() != nil:
			return // released while it was bound
		case err != nil:
			e.bindFailed(err)
			r.signal()
			return
		}
		e.bind(b, time.Now())
		r.wg.Go(func() { e.awaitSync(ctx, e.informer.HasSyncedChecker().Done()) })
		e.informer.RunWithContext(ctx)
	})
}

// checkShardSelectors asks the source whether the API server applies shard
// selectors (KEP-5866) to the objects of key's kind, and records the answer
// for the sharded stores of the kind requested afterwards: when it does,
// each lists and watches its shard; when it does not (kube-apiserver's
// ShardedListAndWatch feature gate is off), each is a view of the store of
// its whole spec (or of the broader store that one is a view of), which
// lists and watches every object once, rather than each shard receiving
// every object. The source asks with key's shard
// selector, or one of its own when key has none. fxshard checks the kind
// of each sharded store before it takes buckets for it. Without an answer (an
// error, or a source that cannot tell) nothing is recorded: sharded stores
// then drop on the client what arrives outside their shard.
func (r *Registry) checkShardSelectors(ctx context.Context, key Key) (applied bool, err error) {
	r.mu.Lock()
	src := r.src
	r.mu.Unlock()
	if src == nil {
		return false, fmt.Errorf("store %s: check shard selectors after the registry has started", key)
	}
	checker, ok := src.(shardSelectorChecker)
	if !ok {
		return false, fmt.Errorf("store %s: the source %T cannot tell whether the API server applies shard selectors", key, src)
	}
	if key.Shard == "" {
		key.Shard = probeShard
	}
	applied, err = checker.AppliesShardSelectors(ctx, key)
	if err != nil {
		return false, fmt.Errorf("store %s: check whether the API server applies shard selectors: %w", key, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if applied {
		delete(r.shardsIgnored, key.Kind.GroupKind())
	} else {
		r.shardsIgnored[key.Kind.GroupKind()] = true
	}
	return applied, nil
}

// releaseLocked drops one request for e, and e once none is left, with
// the requests e holds: a view's for its parent, a shard's for the store
// of its whole spec. The registry's lock is held.
func (r *Registry) releaseLocked(e *entry) {
	if e.refs--; e.refs > 0 {
		return
	}
	r.forgetLocked(e)
	e.backing().close()
	if p := e.parent; p != nil {
		delete(p.views, e)
		r.releaseLocked(p)
	}
	if w := e.whole; w != nil {
		w.shardViews--
		r.releaseLocked(w)
	}
}

// forgetLocked stops e and removes it from the registry. The registry's
// lock is held.
func (r *Registry) forgetLocked(e *entry) {
	delete(r.entries, e.key)
	r.order = slices.DeleteFunc(r.order, func(o *entry) bool { return o == e })
	e.synced.Store(false)
	if e.stop != nil {
		e.stop()
	}
	e.closeShared()
	r.released.Add(1)
	r.log.Info("store released: no request holds it; its informer stops", zap.Stringer("store", e.key))
	r.signalLocked()
}

// retryLocked starts e again if it could not be bound, or, for a view, its
// parent. The registry's lock is held.
func (r *Registry) retryLocked(e *entry) {
	e = e.root() // a view starts with its parent
	if e.takeBindFailure() {
		r.startLate(e)
	}
}

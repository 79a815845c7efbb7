package fxstore

import (
	"context"
	"errors"
	"maps"
	"slices"

	"go.uber.org/zap"
)

// viewsFollowLocked moves the views of p, whose last request of its own is
// gone, each to a new parent or an informer of its own; p stops once the
// last has moved, as each gives back its request for p. p stays while a
// view cannot move: a shard served from p, or a view with a handler that
// is not tracked (its parent lasted when it was added). The registry's
// lock is held.
func (r *Registry) viewsFollowLocked(p *entry) {
	if !r.started || r.stopped || p.emptying || p.shardViews > 0 || len(p.views) == 0 {
		return
	}
	for v := range p.views {
		if v.whole != nil || v.moving || !v.handlers.CanMove() {
			return
		}
	}
	p.emptying = true
	for _, v := range slices.SortedFunc(maps.Keys(p.views), func(a, b *entry) int { return compareKeys(a.key, b.key) }) {
		r.moveLocked(v, p)
	}
}

func compareKeys(a, b Key) int {
	switch as, bs := a.String(), b.String(); {
	case as < bs:
		return -1
	case as > bs:
		return 1
	}
	return 0
}

// moveLocked starts moving view v off from: to the broadest other running
// store that covers it, or else to an informer of its own. The registry's
// lock is held.
func (r *Registry) moveLocked(v, from *entry) {
	v.moving = true
	ctx := v.ctx
	eligible := func(b *entry) bool {
		return b != from && b.parent == nil && !b.emptying && !b.moving && b.bindFailure() == nil
	}
	if to := broadestCover(v, r.order, eligible); to != nil {
		if nv, ok := v.viewOf(to); ok {
			to.refs++ // v's, once it has moved; given back if it does not
			r.wg.Go(func() {
				select {
				case <-to.syncedDone():
				case <-ctx.Done():
				}
				r.finishMove(ctx, v, from, to, nv, func() {})
			})
			return
		}
	}
	r.wg.Go(func() { r.moveToOwnInformer(ctx, v, from) })
}

// moveToOwnInformer binds view v and runs an informer of its own, then
// moves it there once the informer has synced.
func (r *Registry) moveToOwnInformer(ctx context.Context, v, from *entry) {
	b, err := r.src.Bind(ctx, v.key)
	if err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		v.moving = false
		if ctx.Err() == nil {
			r.log.Error("store cannot have an informer of its own; it stays a view of its parent, which keeps running for it",
				zap.Stringer("store", v.key), zap.Stringer("parent", from.key), zap.Error(err))
		}
		return
	}
	r.mu.Lock()
	if r.entries[v.key] != v || ctx.Err() != nil {
		r.mu.Unlock()
		return
	}
	v.attach(b)
	indexes := slices.Collect(maps.Values(v.indexes))
	if err := v.addInformerIndexes(indexNames(indexes), indexes, v.indexFunc); err != nil {
		v.moving = false
		r.mu.Unlock()
		r.log.Error("store cannot have an informer of its own; it stays a view of its parent, which keeps running for it",
			zap.Stringer("store", v.key), zap.Stringer("parent", from.key), zap.Error(err))
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	r.wg.Go(func() { v.informer.RunWithContext(runCtx) })
	r.mu.Unlock()
	select {
	case <-v.informer.HasSyncedChecker().Done():
	case <-ctx.Done():
	}
	r.finishMove(ctx, v, from, nil, newOwnInformer(v), stop)
}

// finishMove moves view v from its parent, from, to backing nb: a view of
// to, or, with to nil, v's own informer, which undo stops if v does not
// move. v's readers switch to nb at once; its handlers hear what changed
// (informers.Handlers.Move). v then gives back its request for from.
func (r *Registry) finishMove(ctx context.Context, v, from, to *entry, nb backing, undo func()) {
	err := v.handlers.Move(ctx, nb.informer(), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.entries[v.key] != v || ctx.Err() != nil {
			return false
		}
		// Indexes asked for while it moved.
		if err := nb.add(request{indexOnly: true}, slices.Collect(maps.Values(v.indexes))); err != nil {
			r.log.Error("store cannot move: an index", zap.Stringer("store", v.key), zap.Error(err))
			return false
		}
		old := v.backing()
		v.backed.Store(&backingRef{nb})
		old.close()
		delete(from.views, v)
		v.parent, v.moving = to, false
		if to != nil {
			if to.views == nil {
				to.views = make(map[*entry]struct{})
			}
			to.views[v] = struct{}{}
		}
		r.moved.Add(1)
		fields := []zap.Field{zap.Stringer("store", v.key), zap.Stringer("from", from.key)}
		if to != nil {
			fields = append(fields, zap.Stringer("viewOf", to.key))
		}
		r.log.Info("store moved: its parent has no request of its own", fields...)
		r.releaseLocked(from)
		if to != nil && to.own == 0 {
			r.viewsFollowLocked(to) // its own requests went while v moved
		}
		return true
	})
	if err == nil {
		return
	}
	undo()
	r.mu.Lock()
	defer r.mu.Unlock()
	if to != nil {
		nb.close()
		r.releaseLocked(to)
	}
	if r.entries[v.key] == v {
		v.moving = false
		if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			r.log.Error("store cannot move; it stays a view of its parent, which keeps running for it",
				zap.Stringer("store", v.key), zap.Stringer("parent", from.key), zap.Error(err))
		}
	}
}

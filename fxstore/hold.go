package fxstore

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/internal/caller"
)

// Held is a store asked for with Hold: a Store its owner gives back.
type Held[T client.Object] struct {
	*Store[T]
	release func()
}

// Release gives the hold back. Calling it again does nothing, and one
// owner's release never ends another's hold.
func (h *Held[T]) Release() { h.release() }

// Hold asks for the store of T objects matching spec, as For does, for an
// owner that gives it back: with Release, or by ending ctx. Use it for a
// store asked for while the app runs; For's stores live as long as the
// app.
//
// A store lives while a request holds it: a For, a Hold not released, or
// a view of it. Once the last goes, its informer stops, its watch closes
// and the registry forgets it. Views do not keep it: once the last For or
// Hold of it goes, each view moves to a new parent or an informer of its
// own, with no gap its readers and handlers see, and then it stops. Its objects, and the parts they share, are
// freed once no Held or Store value of it is left: drop them too.
// Afterwards reads of it fail with ErrNotSynced, and asking for the spec
// again makes a new store.
func Hold[T client.Object](ctx context.Context, r *Registry, spec Spec, opts ...Option) (*Held[T], error) {
	req := newRequest(opts)
	req.held = true
	if !req.named {
		req.consumer = caller.Name(1)
	}
	e, release, err := r.hold(reflect.TypeFor[T](), spec, req)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, release)
	return &Held[T]{Store: &Store[T]{e: e}, release: func() { stop(); release() }}, nil
}

// recorded notes req, a request For made for e before Start, so that
// releaseConsumer can give it back.
func (r *Registry) recorded(e *entry, req request) {
	if req.indexOnly {
		return // no request to give back
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return
	}
	if r.byConsumer == nil {
		r.byConsumer = make(map[string][]func())
	}
	r.byConsumer[req.consumer] = append(r.byConsumer[req.consumer], r.releaser(e, req))
}

// releaseConsumer gives back every request consumer made with For before
// Start. fxcontroller gives back what the constructor of a controller the
// app leaves out asked for.
func (r *Registry) releaseConsumer(consumer string) {
	r.mu.Lock()
	releases := r.byConsumer[consumer]
	delete(r.byConsumer, consumer)
	r.mu.Unlock()
	for _, release := range releases {
		release()
	}
}

// newRequest applies opts to a request.
func newRequest(opts []Option) request {
	var req request
	for _, o := range opts {
		o.applyTo(&req)
	}
	return req
}

// hold registers req for a store of typ objects matching spec and returns
// the function that releases it, once.
func (r *Registry) hold(typ reflect.Type, spec Spec, req request) (*entry, func(), error) {
	if req.buckets != nil {
		return nil, nil, fmt.Errorf("store requested by %s: a sharded store is fxshard's to hold; ask for it with fxshard.For", req.consumer)
	}
	e, err := r.register(typ, spec, req)
	if err != nil {
		return nil, nil, err
	}
	return e, r.releaser(e, req), nil
}

// releaser returns the function that gives back req, a counted request
// for e (not indexOnly), once: e stops once no request holds it.
func (r *Registry) releaser(e *entry, req request) func() {
	return sync.OnceFunc(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.entries[e.key] != e {
			return // forgotten already: the registry holds another store of its key, or none
		}
		r.requests--
		e.own--
		if !req.held {
			e.lasting--
		}
		e.mu.Lock()
		if i := slices.Index(e.consumers, req.consumer); i >= 0 {
			e.consumers = slices.Delete(e.consumers, i, i+1)
		}
		e.mu.Unlock()
		r.releaseLocked(e)
		if r.entries[e.key] == e && e.own == 0 {
			r.viewsFollowLocked(e)
		}
	})
}

package fxstore

import (
	"reflect"
	"sync"

	"github.com/fxkube/fxkube/internal/share"
)

// Parts is what the stores of several registries share of their objects.
// A registry given it (WithParts) has its stores keep the parts their
// objects repeat there, one copy for the stores of every such registry:
// the same Deployment rolled out to ten clusters keeps one copy of what
// its Pods repeat. A store's bytes count its share of the parts, by how
// many objects it holds. The zero Parts is ready to use.
//
// Stores of one Go type share one table of parts, whose lock they take
// as they take each object. Parts of a store that stops go once no other
// store holds them.
type Parts struct {
	mu    sync.Mutex
	pools map[reflect.Type]*share.Pool
}

// NewParts returns Parts no store shares yet.
func NewParts() *Parts { return &Parts{} }

// WithParts makes the registry's stores share the parts of their objects
// through p, with the stores of every other registry given p. Stores
// asked for WithoutSharing share nothing.
func WithParts(p *Parts) RegistryOption {
	return newOption(func(r *Registry) { r.parts = p }, "fxstore.WithParts(...)")
}

// table returns a table for e's objects: of the registry's Parts, or of
// a pool of its own.
func (r *Registry) table(e *entry) *share.Table {
	holder := e.informer.GetIndexer()
	if r.parts == nil {
		return share.New(holder)
	}
	typ := reflect.TypeOf(e.example)
	r.parts.mu.Lock()
	if r.parts.pools == nil {
		r.parts.pools = map[reflect.Type]*share.Pool{}
	}
	pool := r.parts.pools[typ]
	if pool == nil {
		pool = share.NewPool()
		r.parts.pools[typ] = pool
	}
	r.parts.mu.Unlock()
	return pool.Table(holder)
}

// closeShared lets go of the table of e's objects, whose informer stops:
// what only its objects held goes.
func (e *entry) closeShared() {
	if t := e.shared.Swap(nil); t != nil {
		t.Close()
	}
}

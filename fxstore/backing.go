package fxstore

import (
	"time"

	"k8s.io/client-go/tools/cache"
)

// backing is what serves a store: the informer its reads and handlers go
// to, and the store whose list and watch feed it. A store is backed by its
// own informer until the registry plans it, at Start or when it is
// requested later, as a view of a broader store. A sharded store is backed
// by the stores of its buckets from the start. Nothing else asks which
// backing a store has.
type backing interface {
	cache.SharedIndexInformer
	// source is the store whose list and watch feed this one: itself, or
	// a view's parent. Its health is the store's.
	source() *entry
	// close ends the backing when the store is dropped: a view's handlers
	// leave its parent's informer.
	close()
	// heapBytes estimates the heap the backing's n objects take, beyond
	// what other stores hold: 0 for a view, whose objects are its
	// parent's.
	heapBytes(n int) int64
}

// partlySynced is a backing of parts that sync apart, such as the buckets
// of a sharded store. While the store has not synced, Get finds objects in
// the parts that have; another backing has no such parts.
type partlySynced interface {
	getSynced(key string) (item any, ok bool)
}

// healthOfParts is a backing whose health is its parts', such as the
// buckets of a sharded store, which has no list or watch of its own.
type healthOfParts interface {
	health() (since time.Time, err error)
}

// counter is a backing that counts its objects without listing their keys
// together, such as a sharded store, which counts each bucket's.
type counter interface {
	count() int
}

// ownInformer backs a store with an informer of its own, which the
// registry runs.
type ownInformer struct {
	cache.SharedIndexInformer
	e *entry
}

var _ backing = ownInformer{}

func (o ownInformer) source() *entry { return o.e }

// close does nothing: the registry stops the informer (entry.stop).
func (ownInformer) close() {}

func (o ownInformer) heapBytes(n int) int64 { return o.e.heapBytes(n) }

// backingRef holds a backing in an atomic.Pointer.
type backingRef struct{ backing }

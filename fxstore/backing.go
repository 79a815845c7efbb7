package fxstore

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// backing is what serves a store. The registry chooses it, once per store:
//
//   - ownInformer: an informer of the store's own;
//   - view: a broader store's informer, filtered;
//   - heldAsBytes: an informer of its own that holds encodings;
//   - buckets: the stores of the buckets a replica holds (sharding).
//
// As controller-runtime's internal.Cache pairs an informer with a reader,
// a backing is both: the informer handlers and sources go to, and the
// reader behind Get, List, ByIndex and Count. Every request for the store
// and every read goes through it. Health, counts and selection are its
// answers: nothing else asks which backing a store has.
//
// Methods that take the registry's lock say so.
type backing interface {
	reader

	// informer is the informer the store gives out, for handlers.
	informer() cache.SharedIndexInformer
	// add takes one more request for the store, with its indexes not yet
	// declared. An option the backing cannot honour fails, naming the
	// option and what to do. The registry's lock is held.
	add(req request, indexes []index) error
	// health returns since when the list and watch feeding the store have
	// failed, and their last error; since is zero while they work.
	health() (since time.Time, err error)
	// resource names the store's objects in errors, such as NotFound.
	resource() schema.GroupResource
	// describe adds to info what the backing tells of the store. The
	// registry's lock is held.
	describe(info *StoreInfo)
	// close ends the backing when the store is dropped: a view's handlers
	// leave its parent's informer.
	close()
	// heapBytes estimates the heap the backing's n objects take, beyond
	// what other stores hold: 0 for a view, whose objects are its
	// parent's.
	heapBytes(n int) int64
}

// reader reads a backing's objects, in the shape of controller-runtime's
// CacheReader. Objects are shared and read-only.
type reader interface {
	// get returns the object with key ("namespace/name", or "name").
	get(key string) (item any, ok bool)
	// getSynced is get while the store has not synced: an object found in
	// a part that has, such as a bucket of a sharded store. A backing of
	// one part finds none.
	getSynced(key string) (item any, ok bool)
	// list returns the objects in namespace, or all when it is "". It may
	// leave out those sel does not select; the caller still filters by
	// sel.
	list(namespace string, sel labels.Selector) ([]any, error)
	// byIndex returns the objects under value in the store's index name.
	byIndex(name, value string) ([]any, error)
	// count returns how many objects the backing holds.
	count() int
}

// indexerReader reads an indexer: the reader of every backing, but for
// what a backing answers otherwise.
type indexerReader struct{ indexer cache.Indexer }

var _ reader = indexerReader{}

func (x indexerReader) get(key string) (any, bool) {
	item, ok, _ := x.indexer.GetByKey(key)
	return item, ok
}

func (indexerReader) getSynced(string) (any, bool) { return nil, false }

func (x indexerReader) list(namespace string, _ labels.Selector) ([]any, error) {
	if namespace == "" {
		return x.indexer.List(), nil
	}
	return x.indexer.ByIndex(cache.NamespaceIndex, namespace)
}

func (x indexerReader) byIndex(name, value string) ([]any, error) {
	return x.indexer.ByIndex(name, value)
}

func (x indexerReader) count() int { return len(x.indexer.ListKeys()) }

// ownInformer backs a store with an informer of its own, which the
// registry runs.
type ownInformer struct {
	indexerReader
	e *entry
	// inf is the store's informer when the backing was made: a store that
	// waits for its kind gets a new one each time it starts again.
	inf cache.SharedIndexInformer
}

func newOwnInformer(e *entry) *ownInformer {
	return &ownInformer{indexerReader{e.informer.GetIndexer()}, e, e.informer}
}

var _ backing = (*ownInformer)(nil)

func (o *ownInformer) informer() cache.SharedIndexInformer { return o.inf }

// add declares the request's indexes on the store's informer. Before the
// store is planned, it also records the options that choose its backing:
// afterwards, those the store does not have already fail.
func (o *ownInformer) add(req request, indexes []index) error {
	e := o.e
	if e.planned {
		switch {
		case req.unshared && !e.unshared:
			return lateOption(WithoutSharing(), ", its objects sharing their parts")
		case req.asBytes && !e.asBytes:
			return lateOption(HeldAsBytes(), ", holding its objects decoded")
		}
	}
	if err := e.addInformerIndexes(indexNames(indexes), indexes, e.indexFunc); err != nil {
		return err
	}
	if req.ownInformer {
		e.pinned = true
	}
	if req.unshared {
		// A view's objects are its parent's: a store without sharing
		// holds its own.
		e.unshared, e.pinned = true, true
	}
	if req.asBytes && !e.asBytes {
		e.asBytes, e.unshared, e.pinned = true, true, true
		e.codec = newWireCodec(e.example)
		e.backed.Store(&backingRef{newHeldAsBytes(e)})
	}
	return nil
}

// lateOption is the error of an option a store that has started cannot
// honour: how it started, and what to do.
func lateOption(o Option, as string) error {
	return fmt.Errorf("%s: the store has started%s; give the option in a constructor, before the app starts, in every request for the spec", o, as)
}

func (o *ownInformer) health() (time.Time, error) { return o.e.ownHealth() }

func (o *ownInformer) resource() schema.GroupResource { return o.e.boundResource }

func (*ownInformer) describe(*StoreInfo) {}

// close does nothing: the registry stops the informer (entry.stop).
func (*ownInformer) close() {}

func (o *ownInformer) heapBytes(n int) int64 { return o.e.heapBytes(o.indexer, n) }

// indexNames maps each index to its own name: where a store with an
// informer of its own declares it.
func indexNames(indexes []index) map[string]string {
	names := make(map[string]string, len(indexes))
	for _, ix := range indexes {
		names[ix.name] = ix.name
	}
	return names
}

// backingRef holds a backing in an atomic.Pointer.
type backingRef struct{ backing }

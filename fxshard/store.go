package fxshard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/informers"
	"github.com/fxkube/fxkube/internal/primary"
	"github.com/fxkube/fxkube/internal/storehooks"
)

// storeHooks are what fxstore's registry does for fxshard and not for users.
var storeHooks = storehooks.Get[*fxstore.Registry, fxstore.Key, fxstore.Spec]()

// Store is this replica's share of the objects a spec selects: one fxstore
// store per bucket the replica holds, each of which lists and watches only
// its bucket's objects (the API server's shardSelector) or, where the
// server does not apply it, is a view of one store of the whole spec. A bucket's store is asked
// for when the bucket is acquired and dropped once it is given up, so the
// replica holds only its share. Reads see the objects of the buckets held;
// Store is a controller's Primary for NewController.
type Store[T client.Object] struct {
	shards   *Shards
	spec     fxstore.Spec
	key      fxstore.Key // the whole spec's
	shardKey string
	opts     []fxstore.Option

	// stores are the held buckets' stores; a map never changed once
	// stored, so that reads take no lock.
	stores atomic.Pointer[map[int]*fxstore.Store[T]]
	// mu serialises acquiring and releasing buckets.
	mu sync.Mutex
	// informer is the union of the held buckets' informers, as a
	// controller subscribes to it: its handlers hear the objects of a
	// bucket acquired as Adds, and nothing of a bucket given up (its
	// objects are another replica's now, not gone).
	informer *informers.Union[int]
	// reconcileGate makes a controller of the store reconcile the keys of
	// the buckets held (see gate).
	reconcileGate
}

// reconcileGate is primary.Gate, embedded under a name that keeps its
// method out of Store's API.
type reconcileGate = primary.Gate

// For returns the store of the objects spec selects that fall in the
// buckets this replica holds, by shardKey (fxstore.ShardByUID or
// fxstore.ShardByNamespace). It registers nothing until a bucket is
// acquired. spec must not have a Shard of its own.
func For[T client.Object](s *Shards, spec fxstore.Spec, shardKey string, opts ...fxstore.Option) (*Store[T], error) {
	key, err := storeHooks.KeyFor(s.registry, reflect.TypeFor[T](), spec)
	switch {
	case err != nil:
		return nil, fmt.Errorf("sharded store %s: %w", key, err)
	case spec.Shard != nil && !spec.Shard.Empty():
		return nil, fmt.Errorf("sharded store %s: Spec.Shard is set; fxshard.For chooses each bucket's shard, leave it empty", key)
	case shardKey != fxstore.ShardByUID && shardKey != fxstore.ShardByNamespace:
		return nil, fmt.Errorf("sharded store %s: shard key %q is not supported; use fxstore.ShardByUID or fxstore.ShardByNamespace", key, shardKey)
	case shardKey == fxstore.ShardByNamespace && oneNamespace(key):
		return nil, fmt.Errorf("sharded store %s: sharded by namespace, it selects one namespace, so all its objects would be in one bucket; shard it by fxstore.ShardByUID", key)
	}
	st := &Store[T]{shards: s, spec: spec, key: key, shardKey: shardKey, opts: opts}
	st.stores.Store(&map[int]*fxstore.Store[T]{})
	st.informer = informers.NewUnion[int]("sharded store " + key.String())
	st.reconcileGate.Func = st.gate
	if err := s.add(st); err != nil {
		return nil, err
	}
	return st, nil
}

var _ fxstore.Reader[client.Object] = (*Store[client.Object])(nil)

// oneNamespace reports whether key selects the objects of one namespace:
// by its namespace, or a field selector metadata.namespace=.
func oneNamespace(key fxstore.Key) bool {
	if key.Namespace != "" {
		return true
	}
	// Keys hold canonical selectors, which parse.
	sel, _ := fields.ParseSelector(key.FieldSelector)
	for _, r := range sel.Requirements() {
		if r.Field == "metadata.namespace" && r.Operator != selection.NotEquals {
			return true
		}
	}
	return false
}

// Key returns the key of the whole spec; each bucket's store has it with
// the bucket's shard.
func (s *Store[T]) Key() fxstore.Key { return s.key }

// ShardKey returns the field whose hash decides an object's bucket.
func (s *Store[T]) ShardKey() string { return s.shardKey }

// String describes the store.
func (s *Store[T]) String() string { return s.key.String() + " sharded by " + s.shardKey }

// Buckets returns the buckets whose objects the store holds now.
func (s *Store[T]) Buckets() []int { return slices.Sorted(maps.Keys(*s.stores.Load())) }

// acquire asks the registry for bucket's store and hands it the handlers.
func (s *Store[T]) acquire(bucket int, shard sharding.Selector) error {
	spec := s.spec
	spec.Shard = shard
	st, err := fxstore.For[T](s.shards.registry, spec, append(slices.Clone(s.opts), fxstore.WithConsumer(s.shards.consumer(bucket)))...)
	if err != nil {
		return fmt.Errorf("sharded store %s: bucket %d: %w", s.key, bucket, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Reads see the bucket before its objects reach the handlers: a
	// bucket's store that is a view of a synced one replays them at once,
	// and the controller reads each to tell its bucket.
	prev := *s.stores.Load()
	next := maps.Clone(prev)
	next[bucket] = st
	s.stores.Store(&next)
	if err := s.informer.Add(bucket, st.Informer()); err != nil {
		s.stores.Store(&prev)
		return errors.Join(fmt.Errorf("sharded store %s: bucket %d: %w", s.key, bucket, err), storeHooks.Drop(s.shards.registry, st.Key()))
	}
	return nil
}

// release forgets bucket's store: reads and handlers stop seeing its
// objects, and the registry drops it.
func (s *Store[T]) release(bucket int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := (*s.stores.Load())[bucket]
	if !ok {
		return nil
	}
	next := maps.Clone(*s.stores.Load())
	delete(next, bucket)
	s.stores.Store(&next)
	return errors.Join(s.informer.Remove(bucket), storeHooks.Drop(s.shards.registry, st.Key()))
}

// Informer returns the store's informer: handlers added to it get the
// events of every bucket held, now and later.
func (s *Store[T]) Informer() cache.SharedIndexInformer { return s.informer }

// synced reports whether bucket's store has synced.
func (s *Store[T]) synced(bucket int) bool {
	st, ok := (*s.stores.Load())[bucket]
	return ok && st.HasSynced()
}

// HasSynced reports whether the store of every bucket held has synced.
func (s *Store[T]) HasSynced() bool {
	for _, st := range *s.stores.Load() {
		if !st.HasSynced() {
			return false
		}
	}
	return true
}

// WaitForSync blocks until the store of every bucket held now has synced,
// or ctx ends.
func (s *Store[T]) WaitForSync(ctx context.Context) error {
	for _, st := range *s.stores.Load() {
		if err := st.WaitForSync(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Get returns the object with the given namespace and name if it is in a
// bucket held, else a NotFound error: objects of the buckets other replicas
// hold are not here.
func (s *Store[T]) Get(namespace, name string) (T, error) {
	obj, _, err := s.find(namespace, name)
	return obj, err
}

// find is Get, and also returns the bucket whose store holds the object.
func (s *Store[T]) find(namespace, name string) (T, int, error) {
	var zero T
	stores := *s.stores.Load()
	if s.shardKey == fxstore.ShardByNamespace {
		b := s.shards.coordinator.Buckets().ofValue(namespace)
		st, ok := stores[b]
		if !ok {
			return zero, 0, apierrors.NewNotFound(s.shards.resource(s.key), name)
		}
		obj, err := st.Get(namespace, name)
		return obj, b, err
	}
	var notSynced error
	for b, st := range stores {
		obj, err := st.Get(namespace, name)
		switch {
		case err == nil:
			return obj, b, nil
		case !apierrors.IsNotFound(err):
			notSynced = err
		}
	}
	if notSynced != nil {
		return zero, 0, notSynced // it may be in the bucket not synced yet
	}
	return zero, 0, apierrors.NewNotFound(s.shards.resource(s.key), name)
}

// List returns the objects of the buckets held that match opts, as
// fxstore.Store.List does.
func (s *Store[T]) List(opts ...client.ListOption) ([]T, error) {
	var out []T
	for _, st := range *s.stores.Load() {
		objs, err := st.List(opts...)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// ByIndex returns the objects of the buckets held found under value in the
// named index, as fxstore.Store.ByIndex does.
func (s *Store[T]) ByIndex(index, value string) ([]T, error) {
	var out []T
	for _, st := range *s.stores.Load() {
		objs, err := st.ByIndex(index, value)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// Count returns how many objects the buckets held hold.
func (s *Store[T]) Count() (int, error) {
	n := 0
	for _, st := range *s.stores.Load() {
		c, err := st.Count()
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// gate puts r behind the store's gate, for the controller fxcontroller.New
// makes of the store: each replica reconciles the keys of the buckets it
// holds. A request for a key in no bucket held (enqueued by a secondary
// store's change, say) is dropped; one for a bucket whose store has not
// synced yet is requeued. When the replica gives a bucket up, no reconcile
// of its keys starts any more, and those running finish before another
// replica may take it (see Handler.Releasing).
func (s *Store[T]) gate(r reconcile.Reconciler) reconcile.Reconciler {
	g := &gate{shards: s.shards, r: r, bucketOf: s.bucketOfRequest, synced: s.synced, inflight: map[int]*bucketWork{}}
	s.shards.mu.Lock()
	defer s.shards.mu.Unlock()
	for _, b := range s.shards.coordinator.Owned() {
		g.open(b)
	}
	s.shards.gates = append(s.shards.gates, g)
	return g
}

// bucketOfRequest returns the bucket of req's object: for a namespace
// key, its namespace's; for a uid key, that of the object held, if any.
func (s *Store[T]) bucketOfRequest(req reconcile.Request) (int, bool, error) {
	buckets := s.shards.coordinator.Buckets()
	if s.shardKey == fxstore.ShardByNamespace {
		b := buckets.ofValue(req.Namespace)
		_, held := (*s.stores.Load())[b]
		return b, held, nil
	}
	_, b, err := s.find(req.Namespace, req.Name)
	switch {
	case apierrors.IsNotFound(err):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	return b, true, nil
}

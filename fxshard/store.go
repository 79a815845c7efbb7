package fxshard

import (
	"fmt"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/sharding"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/primary"
	"github.com/fxkube/fxkube/internal/storehooks"
)

// storeHooks are what fxstore's registry does for fxshard and not for users.
var storeHooks = storehooks.Get[*fxstore.Registry, fxstore.Key, fxstore.Spec, fxstore.Option]()

// Store is this replica's share of the objects a spec selects: an
// fxstore.Store backed by one store per bucket the replica holds, each of
// which lists and watches only its bucket's objects (the API server's
// shardSelector) or, where the server does not apply it, is a view of one
// store of the whole spec. A bucket's store is asked for when the bucket
// is acquired and dropped once it is given up, so the replica holds only
// its share. Reads see the objects of the buckets held, and the store has
// synced while each of them has. Its informer's handlers hear the objects
// of a bucket acquired as Adds, and nothing of a bucket given up: its
// objects are another replica's now, not gone. Its Key is the whole
// spec's. Store is a controller's primary for fxcontroller.New.
type Store[T client.Object] struct {
	*fxstore.Store[T]
	shards   *Shards
	shardKey string
	buckets  storehooks.Buckets
}

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
	sharded, buckets := storeHooks.Sharded(s.consumer)
	store, err := fxstore.For[T](s.registry, spec, append(slices.Clone(opts), sharded)...)
	if err != nil {
		return nil, fmt.Errorf("sharded store %s: %w", key, err)
	}
	st := &Store[T]{Store: store, shards: s, shardKey: shardKey, buckets: buckets}
	// A controller of the store reconciles the keys of the buckets held.
	buckets.SetGate(&primary.Gate{Func: st.gate})
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

// ShardKey returns the field whose hash decides an object's bucket.
func (s *Store[T]) ShardKey() string { return s.shardKey }

// String describes the store.
func (s *Store[T]) String() string { return s.Key().String() + " sharded by " + s.shardKey }

// Buckets returns the buckets whose objects the store holds now.
func (s *Store[T]) Buckets() []int { return s.buckets.Held() }

// acquire adds bucket's store, whose objects shard selects.
func (s *Store[T]) acquire(bucket int, shard sharding.Selector) error {
	return s.buckets.Acquire(bucket, shard)
}

// release forgets bucket's store: reads and handlers stop seeing its
// objects, and the registry drops it.
func (s *Store[T]) release(bucket int) error { return s.buckets.Release(bucket) }

// synced reports whether bucket's store has synced.
func (s *Store[T]) synced(bucket int) bool {
	_, synced := s.buckets.Synced(bucket)
	return synced
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
		b := buckets.OfValue(req.Namespace)
		held, _ := s.buckets.Synced(b)
		return b, held, nil
	}
	obj, err := s.Get(req.Namespace, req.Name)
	switch {
	case apierrors.IsNotFound(err):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	return buckets.OfValue(string(obj.GetUID())), true, nil
}

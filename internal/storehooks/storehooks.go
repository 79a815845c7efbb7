// Package storehooks reaches what fxstore's registry does for fxkube's
// other packages but not for users: delaying the start barrier, making a
// store of the buckets a replica holds, asking whether the API server
// applies shard selectors, and the requests a controller-runtime cache
// makes.
//
// fxstore sets the hooks as it is initialised; the packages that import
// fxstore read them once, as they are. This is grpc-go's internal package
// idiom, typed: R is *fxstore.Registry, K fxstore.Key, S fxstore.Spec and
// O fxstore.Option, which this package cannot name without importing
// fxstore.
package storehooks

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/sharding"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/internal/primary"
)

// Hooks are the functions fxstore gives its sibling packages.
type Hooks[R, K, S, O any] struct {
	// Delay makes r's WaitForSync wait, besides every store, until release
	// is called; name says in its errors what it waits for. lifecycle
	// delays the start barrier while caches sync and controllers warm up.
	Delay func(r R, name string) (release func())
	// Sharded returns an option that makes For return a sharded store:
	// the union of the stores of the buckets added to it through the
	// Buckets returned, which start empty. consumer names the consumer of
	// a bucket's store.
	Sharded func(consumer func(bucket int) string) (O, Buckets)
	// CheckShardSelectors asks the source whether the API server applies
	// shard selectors to key's kind, and records the answer for the
	// sharded stores of the kind requested afterwards.
	CheckShardSelectors func(ctx context.Context, r R, key K) (applied bool, err error)
	// KeyFor returns the key of the store of typ objects that spec asks
	// for, or why there is none, without asking for it.
	KeyFor func(r R, typ reflect.Type, spec S) (K, error)
	// Matcher tells whether an object is one the store of key selects,
	// evaluating on the client what the API server selects.
	Matcher func(key K) (func(client.Object) bool, error)
	// ForObject is For for a type known only at run time, as a
	// controller-runtime cache's kinds are: the store holds objects of
	// example's type. It returns an *fxstore.Store[client.Object].
	ForObject func(r R, example client.Object, spec S, opts ...O) (any, error)
	// HoldObject is ForObject for a request its caller releases: the
	// store lives until release is called, unless others hold it.
	HoldObject func(r R, example client.Object, spec S, opts ...O) (store any, release func(), err error)
	// FieldIndex is fxstore.WithFieldIndex under the index name given,
	// printed as call.
	FieldIndex func(name string, extract client.IndexerFunc, call string) O
	// FieldIndexValue is how a field index files value for an object in
	// namespace, or in any namespace when it is "".
	FieldIndexValue func(namespace, value string) string
	// IndexOnly adds a request's indexes to its store without counting
	// another request.
	IndexOnly O
	// Started reports whether r has started.
	Started func(r R) bool
	// CheckSpec reports what is wrong with spec, whatever its kind.
	CheckSpec func(r R, spec S) error
	// ReleaseConsumer gives back every request consumer made of r with
	// fxstore.For before r started.
	ReleaseConsumer func(r R, consumer string)
	// Gate returns the gate a controller of store reconciles through, or
	// nil: a sharded store's, given through its Buckets. store is a
	// *fxstore.Store or a value that embeds one, such as *fxshard.Store.
	Gate func(store any) primary.Gated
	// WaitForKind records, before r starts, that the requests consumers
	// make are for controllers that wait for their kind to be served
	// (fxcontroller.WhenServed): a store of a kind only they asked for
	// does not fail the start when its kind is not served, but waits.
	WaitForKind func(r R, consumers []string)
	// Serve starts the store of key, which waits for its kind, now that
	// the kind is served (wait for it with WaitForStore); release gives
	// it back, and the last release stops it again. A store that does not
	// wait for its kind runs anyway.
	Serve func(ctx context.Context, r R, key K) (release func(), err error)
	// WaitingForKind reports whether the store of key waits for its kind,
	// not started.
	WaitingForKind func(r R, key K) bool
	// DetectMutations makes r keep a copy of every object its stores take,
	// before r starts; check names each object changed in place since.
	// The test kits use it.
	DetectMutations func(r R) (check func() error, err error)
}

// Buckets are the buckets of a sharded store (see Hooks.Sharded).
type Buckets interface {
	// Acquire asks for the store of the objects of bucket, which shard
	// selects, and adds it to the sharded store: reads see its objects,
	// and the sharded store's handlers hear them.
	Acquire(bucket int, shard sharding.Selector) error
	// Release removes bucket's store, without Delete events, and drops
	// it. Releasing a bucket not held does nothing.
	Release(bucket int) error
	// Held returns the buckets held, in order.
	Held() []int
	// Synced reports whether bucket is held, and whether its store has
	// synced.
	Synced(bucket int) (held, synced bool)
	// SetGate gives the sharded store the gate its controllers reconcile
	// through (see Hooks.Gate).
	SetGate(g primary.Gated)
}

var hooks any

// Set records fxstore's hooks. fxstore calls it once, as it is initialised.
func Set[R, K, S, O any](h *Hooks[R, K, S, O]) { hooks = h }

// Get returns fxstore's hooks. Its type arguments must be fxstore's: any
// other is a mistake the package's first test finds, as it panics.
func Get[R, K, S, O any]() *Hooks[R, K, S, O] { return hooks.(*Hooks[R, K, S, O]) }

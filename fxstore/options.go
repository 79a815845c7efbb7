package fxstore

import (
	"fmt"
	"reflect"

	"go.uber.org/zap"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/internal/caller"
)

// Options are typed by the call that takes them, as controller-runtime's
// builder options are, so that an option given to the wrong call does not
// compile. Each prints as the call that made it, as fx's options do, in
// errors and in describe.

// Option configures a request for a store: For's options.
type Option interface {
	fmt.Stringer
	applyTo(*request)
}

// RegistryOption configures NewRegistry.
type RegistryOption interface {
	fmt.Stringer
	applyTo(*Registry)
}

// option is an option for a T, printed as call.
type option[T any] struct {
	call  string
	apply func(*T)
}

func (o option[T]) String() string { return o.call }
func (o option[T]) applyTo(t *T)   { o.apply(t) }
func newOption[T any](apply func(*T), format string, args ...any) option[T] {
	return option[T]{call: fmt.Sprintf(format, args...), apply: apply}
}

// WithCluster names the cluster whose stores the registry holds: it is
// part of every store's Key. Defaults to "", the app's own cluster.
// fxcluster gives each member cluster a registry of its own.
func WithCluster(name string) RegistryOption {
	return newOption(func(r *Registry) { r.cluster = name }, "fxstore.WithCluster(%q)", name)
}

// WithLogger sets the logger stores report through. Defaults to zap.NewNop().
func WithLogger(l *zap.Logger) RegistryOption {
	return newOption(func(r *Registry) { r.log = l }, "fxstore.WithLogger(%s)", loggerName(l))
}

func loggerName(l *zap.Logger) string {
	if l == nil {
		return "nil"
	}
	if name := l.Name(); name != "" {
		return fmt.Sprintf("logger %q", name)
	}
	return "logger"
}

// request is one request for a store, as For's options make it.
type request struct {
	consumer string
	named    bool // consumer was given (WithConsumer)
	indexes  []index
	// indexOnly adds indexes to a store already requested, without
	// counting another request.
	indexOnly bool
	// held is a request its owner gives back (Hold), not one for the life
	// of the app.
	held bool
	// ownInformer keeps the store on an informer of its own.
	ownInformer bool
	// unshared turns sharing off for the store.
	unshared bool
	// asBytes holds the store's objects as bytes.
	asBytes bool
	// buckets makes the store a sharded one, of these buckets' stores.
	buckets *buckets
}

type index struct {
	name   string
	objTyp reflect.Type
	fn     cache.IndexFunc
	fnID   string // identifies the user's function, to detect conflicts
	call   string // the option that declared it
}

// WithIndex declares a named index on the store: fn returns the values an
// object is found under by Store.ByIndex. Requests for one store that declare
// the same index name must pass the same function. Indexes are the store's
// own, asked before or after start: a view's go onto the informer of the
// store serving it, apart from that store's indexes of the same name.
//
// T is the store's object type, or an interface it implements, such as
// client.Object.
func WithIndex[T client.Object](name string, fn func(T) []string) Option {
	call := fmt.Sprintf("fxstore.WithIndex(%q, %s)", name, caller.Of(fn))
	return newOption(func(r *request) {
		r.indexes = append(r.indexes, index{
			name:   name,
			objTyp: reflect.TypeFor[T](),
			fnID:   caller.Identity(fn),
			call:   call,
			fn: func(obj any) ([]string, error) {
				t, ok := obj.(T)
				if !ok {
					return nil, nil
				}
				return fn(t), nil
			},
		})
	}, "%s", call)
}

// WithFieldIndex declares an index of the store by field, with
// controller-runtime's semantics (client.FieldIndexer): extract returns the
// values an object is found under, and Store.ByField finds objects by value,
// in one namespace or in all. The index is named FieldIndexName(field).
// Requests for one store that index the same field must pass the same
// function.
func WithFieldIndex(field string, extract client.IndexerFunc) Option {
	return fieldIndexNamed(FieldIndexName(field), extract,
		fmt.Sprintf("fxstore.WithFieldIndex(%q, %s)", field, caller.Of(extract)))
}

// fieldIndexNamed is WithFieldIndex with the index's name, declared by
// call.
func fieldIndexNamed(name string, extract client.IndexerFunc, call string) Option {
	return newOption(func(r *request) {
		r.indexes = append(r.indexes, index{
			name:   name,
			objTyp: reflect.TypeFor[client.Object](),
			fnID:   caller.Identity(extract),
			call:   call,
			fn: func(obj any) ([]string, error) {
				o, ok := obj.(client.Object)
				if !ok {
					return nil, nil
				}
				values := extract(o)
				ns := o.GetNamespace()
				if ns == "" {
					out := make([]string, len(values))
					for i, v := range values {
						out[i] = namespacedValue("", v)
					}
					return out, nil
				}
				// Each value is found in its namespace and in all of them.
				out := make([]string, 2*len(values))
				for i, v := range values {
					out[i] = namespacedValue(ns, v)
					out[len(values)+i] = namespacedValue("", v)
				}
				return out, nil
			},
		})
	}, "%s", call)
}

// FieldIndexName is the name of the index WithFieldIndex declares for field,
// the name controller-runtime's cache gives it.
func FieldIndexName(field string) string { return "field:" + field }

// namespacedValue is how a field index stores value for an object in
// namespace ns, or in any namespace when ns is empty, as controller-runtime's
// cache does.
func namespacedValue(ns, value string) string {
	if ns == "" {
		ns = "__all_namespaces"
	}
	return ns + "/" + value
}

// WithConsumer names who asks for the store, for describe and metrics.
// Defaults to the function that called For, such as "rollout.newController".
func WithConsumer(name string) Option {
	return newOption(func(r *request) { r.consumer, r.named = name, true }, "fxstore.WithConsumer(%q)", name)
}

// WithOwnInformer keeps the store on an informer of its own, even when a
// broader store could serve it as a view. A view costs no copy of any
// object and no watch, but each Get evaluates its selector on the object
// found, and each event of the broader store is filtered for its
// subscribers: ask for an informer of its own when the view is a small part
// of a large, busy store and its reads or events are the hot path, and a
// second copy of its objects is affordable. A metadata-only view of a typed
// store also makes each object it returns (one allocation per Get, one per
// List), as its objects are the typed store's; BENCHMARKS.md has the
// figures.
//
// A store that has started as a view cannot take it: ask for it before the
// app starts, in a constructor.
func WithOwnInformer() Option {
	return newOption(func(r *request) { r.ownInformer = true }, "fxstore.WithOwnInformer()")
}

// WithoutSharing turns sharing off for the store: its objects hold their
// own copy of every part, as decoded.
//
// By default a store's objects share the parts they repeat: the
// replicas of a Deployment share their containers, labels and
// resources, and every object shares its strings. Taking an object
// costs time on each list and watch event; BENCHMARKS.md has the
// figures. Turn sharing off for a store whose objects repeat little and
// change often, or to rule sharing out while chasing a bug. The store
// then has an informer of its own, as with WithOwnInformer: a view's
// objects are its parent's. A store that has started sharing cannot take
// it: ask for it before the app starts.
func WithoutSharing() Option {
	return newOption(func(r *request) { r.unshared = true }, "fxstore.WithoutSharing()")
}

// HeldAsBytes keeps the store's objects as their wire encoding:
// protobuf for built-in kinds, JSON for others. Each read, event and
// index function decodes the object anew. Reads then cost a decode and
// allocate, but give the caller a copy of its own.
//
// A protobuf encoding shares the fields other objects repeat: the
// replicas of a Deployment mostly hold one copy of their containers. A
// field is shared once seen in another object, or if the object an
// update replaces shared it. Only Kubernetes' own types are held as
// protobuf.
//
// JSON may not give an object back. A type may have MarshalJSON and
// UnmarshalJSON methods that disagree. A transform may set a field JSON
// leaves out, or a value of another type in an interface. So each object
// of a type with such methods, fields or interfaces, from outside
// Kubernetes' packages, is decoded once as it is taken, to check. An
// object JSON would change is kept decoded, with a warning, and read as
// a copy.
//
// Use it for a store read rarely: a kind listed once per reconcile of
// something else, or watched only to trigger. It applies to the store of
// the spec, for every module that asks for it, and must be asked before
// the app starts. Such a store has an informer of its own: it is no view,
// and no store is a view of it.
func HeldAsBytes() Option {
	return newOption(func(r *request) { r.asBytes = true }, "fxstore.HeldAsBytes()")
}

// indexOnly adds a request's indexes to its store without counting it as
// another request: the cache has requested the store already.
var indexOnly Option = newOption(func(r *request) { r.indexOnly = true }, "index only")

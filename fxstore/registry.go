package fxstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/fxkube/fxkube/internal/caller"
)

// Registry hands out stores, one per distinct Key, and starts them. It is
// safe for concurrent use. An app has one Registry; Module provides it.
//
// Asking for a store (For) only registers it. Start connects every store to
// its Source at once, and Stop ends them.
type Registry struct {
	scheme *k8sruntime.Scheme
	log    *zap.Logger

	mu       sync.Mutex
	entries  map[Key]*entry
	order    []*entry // in request order, for stable output
	requests int
	started  bool

	// changed is closed, and replaced, whenever a store syncs or reports a
	// list/watch error, so WaitForSync never polls.
	changed chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// RegistryOption configures a Registry.
type RegistryOption func(*Registry)

// WithLogger sets the logger stores report through. Defaults to zap.NewNop().
func WithLogger(l *zap.Logger) RegistryOption {
	return func(r *Registry) { r.log = l }
}

// NewRegistry returns an empty Registry whose typed stores resolve their kind
// through scheme.
func NewRegistry(scheme *k8sruntime.Scheme, opts ...RegistryOption) *Registry {
	r := &Registry{
		scheme:  scheme,
		log:     zap.NewNop(),
		entries: make(map[Key]*entry),
		changed: make(chan struct{}),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Scheme returns the scheme the registry resolves Go types with.
func (r *Registry) Scheme() *k8sruntime.Scheme { return r.scheme }

// Option adds to a store request.
type Option interface{ apply(*request) }

type optionFunc func(*request)

func (f optionFunc) apply(r *request) { f(r) }

type request struct {
	consumer string
	indexes  []index
}

type index struct {
	name   string
	objTyp reflect.Type
	fn     cache.IndexFunc
	fnPtr  uintptr // identifies the user's function, to detect conflicts
}

// WithIndex declares a named index on the store: fn returns the values an
// object is found under by Store.ByIndex. Requests for one store that declare
// the same index name must pass the same function.
func WithIndex[T client.Object](name string, fn func(T) []string) Option {
	return optionFunc(func(r *request) {
		r.indexes = append(r.indexes, index{
			name:   name,
			objTyp: reflect.TypeFor[T](),
			fnPtr:  reflect.ValueOf(fn).Pointer(),
			fn: func(obj any) ([]string, error) {
				t, ok := obj.(T)
				if !ok {
					return nil, nil
				}
				return fn(t), nil
			},
		})
	})
}

// WithConsumer names who asks for the store, for describe and metrics.
// Defaults to the function that called For, such as "rollout.newController".
func WithConsumer(name string) Option {
	return optionFunc(func(r *request) { r.consumer = name })
}

// For returns the store of T objects matching spec, registering it on first
// request. Every request for an equivalent spec returns a store backed by the
// same informer. For does no I/O: the store fills once the registry starts.
//
// T is a pointer to a Go type registered in the registry's scheme, or
// *unstructured.Unstructured or *metav1.PartialObjectMetadata, for which
// spec.Kind is required.
func For[T client.Object](r *Registry, spec Spec, opts ...Option) (*Store[T], error) {
	req := request{consumer: caller.Name(1)}
	for _, o := range opts {
		o.apply(&req)
	}
	e, err := r.register(reflect.TypeFor[T](), spec, req)
	if err != nil {
		return nil, err
	}
	return &Store[T]{e: e}, nil
}

func (r *Registry) register(typ reflect.Type, spec Spec, req request) (*entry, error) {
	key, example, err := r.keyFor(typ, spec)
	if err != nil {
		return nil, fmt.Errorf("store %s requested by %s: %w", key, req.consumer, err)
	}
	for _, ix := range req.indexes {
		if ix.name == "" {
			return nil, fmt.Errorf("store %s requested by %s: index has no name", key, req.consumer)
		}
		if ix.objTyp != typ {
			return nil, fmt.Errorf("store %s requested by %s: index %q takes %s but the store holds %s",
				key, req.consumer, ix.name, ix.objTyp, typ)
		}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[key]
	if !ok {
		if r.started {
			return nil, fmt.Errorf("store %s requested by %s: the registry has already started; ask for stores in constructors", key, req.consumer)
		}
		e = newEntry(key, example, spec.transform(), r)
	}
	if err := e.add(spec.transform(), req); err != nil {
		return nil, fmt.Errorf("store %s requested by %s: %w", key, req.consumer, err)
	}
	if !ok {
		r.entries[key] = e
		r.order = append(r.order, e)
	}
	r.requests++
	return e, nil
}

var (
	unstructuredType = reflect.TypeFor[*unstructured.Unstructured]()
	metadataType     = reflect.TypeFor[*metav1.PartialObjectMetadata]()
)

// keyFor resolves the kind and projection of a store of typ and canonicalises
// spec into its key. It returns an example object of typ for the informer.
func (r *Registry) keyFor(typ reflect.Type, spec Spec) (Key, k8sruntime.Object, error) {
	if typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
		key, _ := spec.key(spec.Kind, Typed)
		return key, nil, fmt.Errorf("%s is not a pointer to a struct; ask for a store of a Kubernetes object type such as *corev1.ConfigMap", typ)
	}
	example := reflect.New(typ.Elem()).Interface().(k8sruntime.Object)
	var (
		gvk  = spec.Kind
		proj = Typed
	)
	switch typ {
	case unstructuredType:
		proj = Unstructured
	case metadataType:
		proj = Metadata
	default:
		scheme, err := apiutil.GVKForObject(example, r.scheme)
		if err != nil {
			key, _ := spec.key(spec.Kind, Typed)
			return key, nil, fmt.Errorf("type %s is not in the scheme; register its package with fxstore.AddToScheme: %w", typ, err)
		}
		if !gvk.Empty() && gvk != scheme {
			key, _ := spec.key(scheme, Typed)
			return key, nil, fmt.Errorf("Spec.Kind %s does not match %s, which the scheme registers as %s; leave Spec.Kind empty",
				kindString(gvk), typ, kindString(scheme))
		}
		gvk = scheme
	}
	key, err := spec.key(gvk, proj)
	return key, example, err
}

// StoreInfo describes one store of a registry.
type StoreInfo struct {
	Key       Key
	Consumers []string // who asked, in request order
	Indexes   []string // declared index names, sorted
	Status    StoreStatus
}

// StoreStatus is the state of a store's connection to its source.
type StoreStatus struct {
	Synced       bool
	SyncDuration time.Duration // from start to synced
	LastError    error         // the last list/watch error, until a list or watch succeeds again
}

// Stores describes every store, in the order they were first requested.
func (r *Registry) Stores() []StoreInfo {
	r.mu.Lock()
	entries := slices.Clone(r.order)
	r.mu.Unlock()
	infos := make([]StoreInfo, len(entries))
	for i, e := range entries {
		infos[i] = e.info()
	}
	return infos
}

// Requests returns how many store requests the registry has served.
func (r *Registry) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Start connects every store to src and starts them all at once. It first
// binds each store through src, which resolves its kind and checks access;
// if any store cannot be bound, Start starts nothing and returns an error
// listing every such store. Start returns without waiting for the stores to
// sync (see WaitForSync). A registry starts once; Stop ends it.
func (r *Registry) Start(ctx context.Context, src Source) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("fxstore: registry already started")
	}
	r.started = true
	entries := slices.Clone(r.order)
	r.mu.Unlock()

	bindings := make([]Binding, len(entries))
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() {
			b, err := src.Bind(ctx, e.key)
			if err != nil {
				errs[i] = &StoreError{Key: e.key, Err: err}
			}
			bindings[i] = b
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	now := time.Now()
	for i, e := range entries {
		e.bind(bindings[i], now)
		r.wg.Go(func() { e.informer.RunWithContext(runCtx) })
		r.wg.Go(func() { e.awaitSync(runCtx) })
	}
	r.log.Info("stores started", zap.Int("stores", len(entries)), zap.Int("requests", r.Requests()))
	return nil
}

// Stop stops every store and waits for their goroutines to end. Stores keep
// their last contents.
func (r *Registry) Stop() {
	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	r.wg.Wait()
}

// WaitForSync blocks until every store has synced. It returns early with an
// error when a store meets a list/watch error that retrying cannot fix (such
// as forbidden or not found), and when ctx ends before all have synced; the
// error lists every store not synced and its last list/watch error.
func (r *Registry) WaitForSync(ctx context.Context) error {
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		var pending, permanent []error
		for _, info := range r.Stores() {
			if info.Status.Synced {
				continue
			}
			err := &StoreError{Key: info.Key, Err: notSyncedCause(info.Status.LastError)}
			pending = append(pending, err)
			if isPermanent(info.Status.LastError) {
				permanent = append(permanent, err)
			}
		}
		switch {
		case len(pending) == 0:
			return nil
		case len(permanent) > 0:
			return errors.Join(permanent...)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d stores not synced: %w\n%w", len(pending), len(r.Stores()), ctx.Err(), errors.Join(pending...))
		}
	}
}

func notSyncedCause(lastErr error) error {
	if lastErr == nil {
		return errors.New("not synced; no list/watch error reported (the API server may be slow, or the list very large)")
	}
	return fmt.Errorf("not synced; last list/watch error: %w", lastErr)
}

// isPermanent reports list/watch errors that client-go would retry forever
// without success.
func isPermanent(err error) bool {
	return err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err))
}

func (r *Registry) signal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.changed)
	r.changed = make(chan struct{})
}

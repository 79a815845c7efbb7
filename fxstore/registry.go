package fxstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/internal/caller"
	"github.com/fxkube/fxkube/internal/selectors"
)

// Registry hands out stores, one per distinct Key, and starts them. It is
// safe for concurrent use. An app has one Registry; Module provides it.
//
// Asking for a store (For) only registers it. Start connects every store to
// its Source at once, and Stop ends them.
type Registry struct {
	scheme  *k8sruntime.Scheme
	cluster string
	log     *zap.Logger
	// parts, when set, are shared with other registries' stores.
	parts     *Parts
	selectors selectors.Memo

	mu       sync.Mutex
	entries  map[Key]*entry
	order    []*entry // in request order, for stable output
	requests int
	started  bool
	stopped  bool
	// synced is set once WaitForSync first succeeds: stores requested
	// afterwards are started late.
	synced bool
	// src and runCtx start stores requested after Start.
	src    Source
	runCtx context.Context
	// shardsIgnored holds the kinds whose shard selectors the API server
	// does not apply, as checkShardSelectors found.
	shardsIgnored map[schema.GroupKind]bool
	// delays are what WaitForSync waits for besides stores, by name.
	delays  map[int]string
	delayID int
	// detector, set by the test kits before Start, keeps a copy of every
	// object the stores take (see mutationDetector).
	detector atomic.Pointer[mutationDetector]

	// waitsForKind names, until Start, the consumers whose requests are
	// for controllers that wait for their kind to be served (see
	// served.go).
	waitsForKind map[string]bool
	// byConsumer holds, until Start, a release of each request For made,
	// by consumer (see releaseConsumer).
	byConsumer map[string][]func()
	// startedStores and released count the stores started and released,
	// moved the views moved off a parent that went (see viewsFollowLocked).
	startedStores, released, moved atomic.Int64

	// changed is closed, and replaced, whenever a store syncs or reports a
	// list/watch error, so WaitForSync never polls.
	changed chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// NewRegistry returns an empty Registry whose typed stores resolve their kind
// through scheme.
func NewRegistry(scheme *k8sruntime.Scheme, opts ...RegistryOption) *Registry {
	r := &Registry{
		scheme:        scheme,
		log:           zap.NewNop(),
		entries:       make(map[Key]*entry),
		shardsIgnored: make(map[schema.GroupKind]bool),
		changed:       make(chan struct{}),
	}
	for _, o := range opts {
		o.applyTo(r)
	}
	return r
}

// Scheme returns the scheme the registry resolves Go types with.
func (r *Registry) Scheme() *k8sruntime.Scheme { return r.scheme }

// For returns the store of T objects matching spec, registering it on first
// request. Every request for an equivalent spec returns a store backed by the
// same informer. For does no I/O: the store fills once the registry starts.
// A store first requested after the registry has started is started at once,
// in the background, through the same checks as at Start ("started late");
// wait for it with Registry.WaitForStore.
//
// T is a pointer to a Go type registered in the registry's scheme, or
// *unstructured.Unstructured or *metav1.PartialObjectMetadata, for which
// spec.Kind is required.
func For[T client.Object](r *Registry, spec Spec, opts ...Option) (*Store[T], error) {
	req := newRequest(opts)
	if !req.named {
		req.consumer = caller.Name(1)
	}
	e, err := r.register(reflect.TypeFor[T](), spec, req)
	if err != nil {
		return nil, err
	}
	r.recorded(e, req)
	return &Store[T]{e: e}, nil
}

// forObject is For for a type known only at run time, as the cache's
// kinds are: the store holds objects of example's type (for unstructured
// and metadata-only stores, spec.Kind names the kind). The cache always
// names its consumer.
func forObject(r *Registry, example client.Object, spec Spec, opts ...Option) (*Store[client.Object], error) {
	req := newRequest(opts)
	e, err := r.register(reflect.TypeOf(example), spec, req)
	if err != nil {
		return nil, err
	}
	r.recorded(e, req)
	return &Store[client.Object]{e: e}, nil
}

func (r *Registry) register(typ reflect.Type, spec Spec, req request) (*entry, error) {
	key, example, err := r.keyFor(typ, spec)
	if err != nil {
		return nil, fmt.Errorf("store %s requested by %s: %w", key, req.consumer, err)
	}
	for _, ix := range req.indexes {
		if ix.name == "" {
			return nil, fmt.Errorf("store %s requested by %s: %s: index has no name", key, req.consumer, ix.call)
		}
		if ix.objTyp != typ && (ix.objTyp.Kind() != reflect.Interface || !typ.Implements(ix.objTyp)) {
			return nil, fmt.Errorf("store %s requested by %s: %s: index %q takes %s but the store holds %s",
				key, req.consumer, ix.call, ix.name, ix.objTyp, typ)
		}
	}

	if req.buckets != nil {
		// A sharded store is its buckets': the registry holds those.
		return req.buckets.bind(r, typ, key, spec, req)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil, fmt.Errorf("store %s requested by %s: the registry has stopped", key, req.consumer)
	}
	e, ok := r.entries[key]
	if !ok {
		e = newEntry(key, example, spec.transform(), r)
	}
	if err := e.add(spec.transform(), req); err != nil {
		return nil, fmt.Errorf("store %s requested by %s: %w", key, req.consumer, err)
	}
	if !ok {
		r.addLocked(e)
	}
	if !req.indexOnly {
		r.requests++
		e.refs++
		e.own++
		if !req.held {
			e.lasting++
		}
		e.emptying = false
	}
	return e, nil
}

// addIndexers declares indexers added through a store's informer as a
// request for the store declares its indexes: through its backing.
func (r *Registry) addIndexers(e *entry, indexers cache.Indexers) error {
	req := request{indexOnly: true}
	for _, name := range slices.Sorted(maps.Keys(indexers)) {
		fn := indexers[name]
		req.indexes = append(req.indexes, index{name: name, fn: fn, fnID: caller.Identity(fn), call: fmt.Sprintf("Informer().AddIndexers(%q)", name)})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := e.request(req); err != nil {
		return fmt.Errorf("store %s: %w", e.key, err)
	}
	return nil
}

// StoreInfo describes one store of a registry.
type StoreInfo struct {
	Key Key
	// ViewOf is the store this one is served from, when it is a view;
	// before the registry starts, the one it will be served from.
	ViewOf    *Key
	Consumers []string // who asked, in request order
	Indexes   []string // declared index names, sorted
	// Late reports that the store was first requested after every store
	// had synced, such as by a reconciler reading a kind nothing watched,
	// and so was started then.
	Late bool
	// Objects is how many objects the store holds now. Bytes estimates
	// the heap they take: within about 10% of what BenchmarkPods in
	// internal/share measures. A view's objects are its parent's, and
	// its Bytes 0.
	Objects int
	Bytes   int64
	Status  StoreStatus
}

// Err returns the store's failure as Store.Err gives it: a *StoreError
// of a *FailingError, or nil while its source works.
func (i StoreInfo) Err() error {
	return storeFailure(i.Key, i.Status.FailingSince, i.Status.LastError)
}

// StoreStatus is the state of a store's connection to its source.
type StoreStatus struct {
	Synced       bool
	SyncDuration time.Duration // from start to synced
	// LastError is the last list/watch error, until the source works
	// again (see Store.Err). A timeout, which does not say why, comes
	// with the error of a plain list of one object, once one is made.
	LastError error
	// FailingSince is when the store's list/watch began to fail, zero
	// while it works: its objects are at least as old. A view's is its
	// parent's. Errors that are part of a watch's life (it ended, or its
	// resource version expired) are not failures.
	FailingSince time.Time
	// OutsideShard counts the objects a sharded store received outside
	// its shard and dropped: above 0, the API server does not apply shard
	// selectors.
	OutsideShard int64
	// ShardOnClient reports that a sharded store's shard is selected on
	// the client, as the API server does not apply shard selectors: the
	// store is a view (ViewOf: the store of its whole spec, or the broader
	// store that one is a view of), or drops what arrives outside its
	// shard (OutsideShard).
	ShardOnClient bool
	// WaitingForKind reports a store that waits for its kind to be
	// served: only controllers that wait for their kind asked for it
	// (fxcontroller.WhenServed), and the API server does not serve the
	// kind. It holds nothing and has no informer running.
	WaitingForKind bool
}

// Stores describes every store, in the order they were first requested.
func (r *Registry) Stores() []StoreInfo { return r.stores(true) }

// stores describes every store; with sized, what each holds (Objects and
// Bytes), which costs a pass over its keys.
func (r *Registry) stores(sized bool) []StoreInfo {
	r.mu.Lock()
	entries := slices.Clone(r.order)
	var plan map[*entry]*entry
	if !r.started {
		plan = r.planViews(entries)
	}
	r.mu.Unlock()
	infos := make([]StoreInfo, len(entries))
	for i, e := range entries {
		infos[i] = e.info()
		if sized {
			infos[i].Objects, infos[i].Bytes = e.held()
		}
		if p, ok := plan[e]; ok {
			infos[i].ViewOf = &p.key
		}
	}
	return infos
}

// Start connects every store to src and starts them all at once. It first
// binds each store through src, which resolves its kind and checks access;
// if any store cannot be bound, Start starts nothing and returns an error
// listing every such store. Start returns without waiting for the stores to
// sync (see WaitForSync). Stores requested later start as they are
// requested. A registry starts once; Stop ends it.
func (r *Registry) Start(ctx context.Context, src Source) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		cancel()
		return errors.New("fxstore: registry already started")
	}
	r.started = true
	r.byConsumer = nil
	r.cancel, r.src, r.runCtx = cancel, src, runCtx
	r.markWaitingForKindLocked()
	var entries, views []*entry
	parents := make(map[*entry]*entry)
	plan := r.planViews(r.order)
	for _, e := range r.order {
		e.planned = true
		if p, ok := plan[e]; ok && e.serveAsView(p) {
			views = append(views, e)
			parents[e] = p
			continue
		}
		entries = append(entries, e)
	}
	r.mu.Unlock()

	if p, ok := src.(bindPlanner); ok {
		keys := make([]Key, len(entries))
		for i, e := range entries {
			keys[i] = e.key
		}
		p.PlanBinds(keys)
	}
	bindings := make([]Binding, len(entries))
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() {
			b, err := src.Bind(ctx, e.key)
			if err != nil && !e.waitsForKind(err) {
				errs[i] = &StoreError{Key: e.key, Err: err}
			}
			bindings[i] = b
		})
	}
	wg.Wait()
	// An error every store meets alike, such as an API server that no
	// request reaches, is said once.
	for _, err := range errs {
		if wide, ok := errors.AsType[sourceWide](err); ok && wide.SourceWide() {
			return wide
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return errors.New("fxstore: registry stopped while starting")
	}
	for i, e := range entries {
		if e.served.waiting.Load() {
			continue // until its kind is served
		}
		e.bind(bindings[i], now)
		r.runLocked(e)
	}
	for _, e := range views {
		r.startView(e, parents[e])
	}
	r.log.Info("stores started", zap.Int("stores", len(entries)+len(views)), zap.Int("informers", len(entries)), zap.Int("requests", r.requests))
	return nil
}

func (r *Registry) isStarted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

// Stop stops every store and waits for their goroutines to end. Stores keep
// their last contents; no store can be requested any more.
func (r *Registry) Stop() {
	r.mu.Lock()
	r.stopped = true
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.entries {
		e.closeShared()
	}
}

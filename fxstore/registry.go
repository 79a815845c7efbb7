package fxstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	scheme    *k8sruntime.Scheme
	log       *zap.Logger
	selectors canonicalSelectors

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
	var req request
	for _, o := range opts {
		o.applyTo(&req)
	}
	if !req.named {
		req.consumer = caller.Name(1)
	}
	e, err := r.register(reflect.TypeFor[T](), spec, req)
	if err != nil {
		return nil, err
	}
	return &Store[T]{e: e}, nil
}

// forObject is For for a type known only at run time, as the cache's
// kinds are: the store holds objects of example's type (for unstructured
// and metadata-only stores, spec.Kind names the kind). The cache always
// names its consumer.
func forObject(r *Registry, example client.Object, spec Spec, opts ...Option) (*Store[client.Object], error) {
	var req request
	for _, o := range opts {
		o.applyTo(&req)
	}
	e, err := r.register(reflect.TypeOf(example), spec, req)
	if err != nil {
		return nil, err
	}
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
	}
	return e, nil
}

// addLocked adds a new store to the registry and, after Start, starts it:
// as a view of a running store that covers it, or with an informer of its
// own. A sharded store whose kind's shard selectors the API server ignores
// (checkShardSelectors) is a view of the store of its whole spec. The registry's
// lock is held.
func (r *Registry) addLocked(e *entry) {
	r.entries[e.key] = e
	r.order = append(r.order, e)
	if !r.started {
		return
	}
	e.late = r.synced
	switch p := r.lateParent(e); {
	case p != nil && e.serveAsView(p):
		r.startView(e, p)
	case !r.serveShardFromWhole(e):
		r.startLate(e)
	}
	// WaitForSync waits for it too.
	r.signalLocked()
}

// startView starts e as a view of parent: synced once parent is, until
// e is dropped; at once when parent has synced already, as handlers added
// to e hear its objects at once, and may read them. e holds a request for
// parent, which a store made for shards would otherwise drop under it.
// The registry's lock is held.
func (r *Registry) startView(e, parent *entry) {
	parent.refs++ // released with e
	e.startedAt = time.Now()
	ctx := e.runContext(r.runCtx)
	if parent.synced.Load() {
		e.markSynced()
		r.signalLocked()
		return
	}
	r.wg.Go(func() { e.awaitSync(ctx, parent.syncedCh) })
}

// serveShardFromWhole makes sharded store e, when the API server ignores
// its kind's shard selectors, a view of the store of its whole spec (made
// for it if no one asked for that spec), or of the broader store that one
// is a view of: one list and watch of every object, rather than one per
// shard, each receiving every object. Each such shard holds a request for
// the whole store, dropped with it. A whole store that could not start is
// started again: its shards wait for it, and report its error. It reports
// whether e is now such a view. The registry's lock is held.
func (r *Registry) serveShardFromWhole(e *entry) bool {
	if e.key.Shard == "" || !r.shardsIgnored[e.key.Kind.GroupKind()] || e.pinned {
		return false
	}
	wholeKey := e.key
	wholeKey.Shard = ""
	whole, ok := r.entries[wholeKey]
	switch {
	case !ok:
		whole = newEntry(wholeKey, e.example, e.transform, r)
		whole.consumers = []string{"fxstore, for the shards of this spec: the API server does not apply shard selectors"}
		r.addLocked(whole)
	default:
		r.retryLocked(whole)
	}
	parent := whole.backing().source()
	if !e.serveAsView(parent) {
		if !ok {
			r.forgetLocked(whole)
		}
		return false
	}
	whole.refs++
	if whole.shardViews++; whole.shardViews == 1 {
		r.log.Warn("the API server does not apply shard selectors; the shards of this store are views of it, or of the broader store it is a view of, which receives and holds every object",
			zap.Stringer("store", wholeKey), zap.Stringer("informer", parent.key),
			zap.String("fix", "enable kube-apiserver's ShardedListAndWatch feature gate (alpha since Kubernetes 1.36)"))
	}
	e.whole = whole
	r.startView(e, parent)
	return true
}

// lateParent returns the broadest running store that covers e, a store
// requested after Start, to serve it as a view of; nil if none. The
// registry's lock is held.
func (r *Registry) lateParent(e *entry) *entry {
	if e.pinned {
		return nil
	}
	return broadestCover(e, r.order, func(b *entry) bool { return b.backing().source() == b && b.bindFailure() == nil })
}

// broadestCover returns the broadest of candidates, those eligible, that
// covers e; nil if none. Of two equivalent specs written apart, the one that
// sorts first covers the other. The registry's lock is held.
func broadestCover(e *entry, candidates []*entry, eligible func(*entry) bool) *entry {
	var best *entry
	narrow := e.parsedKey()
	for _, b := range candidates {
		if b == e || !covers(b.parsedKey(), narrow) || !eligible(b) {
			continue
		}
		if covers(narrow, b.parsedKey()) && e.key.String() < b.key.String() {
			continue
		}
		if best == nil || covers(b.parsedKey(), best.parsedKey()) {
			best = b
		}
	}
	return best
}

// startLate binds and runs a store requested after Start. The registry's
// lock is held.
func (r *Registry) startLate(e *entry) {
	if e.late {
		r.log.Info("store started late", zap.Stringer("store", e.key), zap.Strings("requestedBy", e.consumers))
	}
	ctx := e.runContext(r.runCtx)
	r.wg.Go(func() {
		b, err := r.src.Bind(ctx, e.key)
		if err != nil {
			e.bindFailed(err)
			r.signal()
			return
		}
		e.bind(b, time.Now())
		r.wg.Go(func() { e.awaitSync(ctx, e.informer.HasSyncedChecker().Done()) })
		e.informer.RunWithContext(ctx)
	})
}

// checkShardSelectors asks the source whether the API server applies shard
// selectors (KEP-5866) to the objects of key's kind, and records the answer
// for the sharded stores of the kind requested afterwards: when it does,
// each lists and watches its shard; when it does not (kube-apiserver's
// ShardedListAndWatch feature gate is off), each is a view of the store of
// its whole spec (or of the broader store that one is a view of), which
// lists and watches every object once, rather than each shard receiving
// every object. The source asks with key's shard
// selector, or one of its own when key has none. fxshard checks the kind
// of each sharded store before it takes buckets for it. Without an answer (an
// error, or a source that cannot tell) nothing is recorded: sharded stores
// then drop on the client what arrives outside their shard.
func (r *Registry) checkShardSelectors(ctx context.Context, key Key) (applied bool, err error) {
	r.mu.Lock()
	src := r.src
	r.mu.Unlock()
	if src == nil {
		return false, fmt.Errorf("store %s: check shard selectors after the registry has started", key)
	}
	checker, ok := src.(shardSelectorChecker)
	if !ok {
		return false, fmt.Errorf("store %s: the source %T cannot tell whether the API server applies shard selectors", key, src)
	}
	if key.Shard == "" {
		key.Shard = probeShard
	}
	applied, err = checker.AppliesShardSelectors(ctx, key)
	if err != nil {
		return false, fmt.Errorf("store %s: check whether the API server applies shard selectors: %w", key, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if applied {
		delete(r.shardsIgnored, key.Kind.GroupKind())
	} else {
		r.shardsIgnored[key.Kind.GroupKind()] = true
	}
	return applied, nil
}

// drop stops a sharded store and forgets it once each request for it has
// been dropped: for a shard whose objects this process no longer handles.
// Its Store values read as not synced afterwards; asking for the same spec
// again makes a new store. Only sharded stores can be dropped: every other
// store is shared for the life of the app.
func (r *Registry) drop(key Key) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[key]
	switch {
	case !ok:
		return fmt.Errorf("store %s: not in the registry, or dropped already; drop only what For returned", key)
	case key.Shard == "":
		return fmt.Errorf("store %s is not sharded; only sharded stores can be dropped", key)
	}
	r.releaseLocked(e)
	return nil
}

// releaseLocked drops one request for e, and e once none is left, with
// the request a shard served from e's whole spec holds. The registry's
// lock is held.
func (r *Registry) releaseLocked(e *entry) {
	if e.refs--; e.refs > 0 {
		return
	}
	r.forgetLocked(e)
	b := e.backing()
	b.close()
	if src := b.source(); src != e {
		r.releaseLocked(src)
	}
	if w := e.whole; w != nil {
		w.shardViews--
		r.releaseLocked(w)
	}
}

// forgetLocked stops e and removes it from the registry. The registry's
// lock is held.
func (r *Registry) forgetLocked(e *entry) {
	delete(r.entries, e.key)
	r.order = slices.DeleteFunc(r.order, func(o *entry) bool { return o == e })
	e.synced.Store(false)
	if e.stop != nil {
		e.stop()
	}
	r.log.Info("store dropped", zap.Stringer("store", e.key))
	r.signalLocked()
}

var (
	unstructuredType = reflect.TypeFor[*unstructured.Unstructured]()
	metadataType     = reflect.TypeFor[*metav1.PartialObjectMetadata]()
)

// keyFor resolves the kind and projection of a store of typ and canonicalises
// spec into its key. It returns an example object of typ for the informer.
func (r *Registry) keyFor(typ reflect.Type, spec Spec) (Key, k8sruntime.Object, error) {
	if typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
		key, _ := spec.key(spec.Kind, Typed, &r.selectors)
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
			key, _ := spec.key(spec.Kind, Typed, &r.selectors)
			return key, nil, fmt.Errorf("type %s is not in the scheme; register its package with fxstore.AddToScheme: %w", typ, err)
		}
		if !gvk.Empty() && gvk != scheme {
			key, _ := spec.key(scheme, Typed, &r.selectors)
			return key, nil, fmt.Errorf("Spec.Kind %s does not match %s, which the scheme registers as %s; leave Spec.Kind empty",
				kindString(gvk), typ, kindString(scheme))
		}
		gvk = scheme
	}
	key, err := spec.key(gvk, proj, &r.selectors)
	return key, example, err
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
	Late   bool
	Status StoreStatus
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
}

// Stores describes every store, in the order they were first requested.
func (r *Registry) Stores() []StoreInfo {
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
	r.cancel, r.src, r.runCtx = cancel, src, runCtx
	var entries, views []*entry
	plan := r.planViews(r.order)
	for _, e := range r.order {
		if p, ok := plan[e]; ok && e.serveAsView(p) {
			views = append(views, e)
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
		p.planBinds(keys)
	}
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
	// An API server that no request reaches fails every store alike: say
	// so once.
	for _, err := range errs {
		if unreachable, ok := errors.AsType[*UnreachableError](err); ok {
			return unreachable
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
		e.bind(bindings[i], now)
		ctx := e.runContext(runCtx)
		r.wg.Go(func() { e.informer.RunWithContext(ctx) })
		r.wg.Go(func() { e.awaitSync(ctx, e.informer.HasSyncedChecker().Done()) })
	}
	for _, e := range views {
		r.startView(e, e.backing().source())
	}
	r.log.Info("stores started", zap.Int("stores", len(entries)+len(views)), zap.Int("informers", len(entries)), zap.Int("requests", r.requests))
	return nil
}

// planViews returns, for each store whose objects are a subset of a
// broader store's, the broadest such store, to serve it as a view of (chains
// collapse: a ⊂ b ⊂ c makes a and b views of c): unless it is pinned to an
// informer of its own or cannot be filtered on the client. The registry's
// lock is held.
func (r *Registry) planViews(all []*entry) map[*entry]*entry {
	parentOf := func(e *entry) *entry {
		if e.pinned {
			return nil
		}
		return broadestCover(e, all, func(*entry) bool { return true })
	}
	parents := make(map[*entry]*entry, len(all))
	for _, e := range all {
		if p := parentOf(e); p != nil {
			parents[e] = p
		}
	}
	plan := make(map[*entry]*entry)
	for _, e := range all {
		root := e
		for range all {
			p, ok := parents[root]
			if !ok {
				break
			}
			root = p
		}
		if root == e {
			continue
		}
		if _, ok := e.viewFilter(root); ok {
			plan[e] = root
		}
	}
	return plan
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
}

// delay makes WaitForSync wait, besides every store, until release is
// called; name says in WaitForSync's errors what it waits for. The app's
// lifecycle delays the initial sync while controllers warm up, as some ask
// for their stores only then. Calling release again does nothing.
func (r *Registry) delay(name string) (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.delays == nil {
		r.delays = make(map[int]string)
	}
	r.delayID++
	id := r.delayID
	r.delays[id] = name
	return sync.OnceFunc(func() {
		r.mu.Lock()
		delete(r.delays, id)
		r.mu.Unlock()
		r.signal()
	})
}

// WaitForSync blocks until every store has synced and every delay has been
// released. It returns early with an error when a store cannot be started or
// meets a list/watch error that retrying cannot fix (such as forbidden or
// not found), and when ctx ends first; the error lists every store not
// synced and its last list/watch error. Once it has succeeded, stores
// requested later are reported as started late.
func (r *Registry) WaitForSync(ctx context.Context) error {
	err := r.waitFor(ctx, nil)
	if err == nil {
		r.mu.Lock()
		r.synced = true
		r.mu.Unlock()
	}
	return err
}

// WaitForStore blocks until the store with key has synced, failing early as
// WaitForSync does. Use it for stores requested after Start. A store
// requested after Start that could not start (its kind not served, or
// access denied) is tried again first, as its CRD or RBAC may have been
// fixed since.
func (r *Registry) WaitForStore(ctx context.Context, key Key) error {
	r.mu.Lock()
	if e, ok := r.entries[key]; ok && r.started && !r.stopped {
		r.retryLocked(e)
	}
	r.mu.Unlock()
	return r.waitFor(ctx, &key)
}

// retryLocked starts e again if it could not be bound, or, for a view, its
// parent. The registry's lock is held.
func (r *Registry) retryLocked(e *entry) {
	e = e.backing().source() // a view starts with its parent
	if e.takeBindFailure() {
		r.startLate(e)
	}
}

// waitFor waits for the store with key, or for every store and delay.
func (r *Registry) waitFor(ctx context.Context, key *Key) error {
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		w := r.waiting(key)
		switch {
		case len(w.permanent) > 0:
			return errors.Join(w.permanent...)
		case key != nil && w.total == 0:
			return fmt.Errorf("fxstore: no store %s", key)
		case len(w.pending) == 0 && len(w.delays) == 0:
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			// Stores requested since are in the diagnosis too.
			w = r.waiting(key)
			r.diagnoseSilent(w)
			pending := w.pending
			for _, d := range w.delays {
				pending = append(pending, fmt.Errorf("%s: not done", d))
			}
			if len(w.pending) == 0 {
				return fmt.Errorf("all %d stores synced; still waiting for %d more: %w\n%w", w.total, len(w.delays), ctx.Err(), errors.Join(pending...))
			}
			return fmt.Errorf("%d of %d stores not synced: %w\n%w", len(w.pending), w.total, ctx.Err(), errors.Join(pending...))
		}
	}
}

// waitState is what waitFor waits for: the stores not synced (those that
// cannot sync among them) and the delays not released.
type waitState struct {
	pending, permanent []error
	total              int
	delays             []string
	// silent are the stores in pending whose list/watch reported no
	// error, or one that does not say why and was not diagnosed yet.
	silent []silentStore
}

// silentStore is a store that did not sync without saying why, and its
// last list/watch error, if any.
type silentStore struct {
	*StoreError
	lastErr error
}

// listChecker is a Source that can list one object of a store's spec with
// a plain list: a streamed initial list that stalls reports no error, where
// a plain list says why (a conversion webhook that cannot be reached).
type listChecker interface {
	checkList(ctx context.Context, key Key) error
}

// diagnoseSilentTimeout bounds each list diagnoseSilent, and the diagnosis
// of a store that begins to fail, makes.
const diagnoseSilentTimeout = 5 * time.Second

// diagnoseSilent lists one object of each store that did not sync without
// saying why, and gives the list's error, if any, as the cause.
func (r *Registry) diagnoseSilent(w waitState) {
	r.mu.Lock()
	checker, ok := r.src.(listChecker)
	r.mu.Unlock()
	if !ok {
		return
	}
	var wg sync.WaitGroup
	for _, s := range w.silent {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), diagnoseSilentTimeout)
			defer cancel()
			switch err := checker.checkList(ctx, s.Key); {
			case err == nil:
			case s.lastErr == nil:
				s.Err = fmt.Errorf("not synced; its watch reports no error, but a list fails: %w", err)
			default:
				s.Err = notSyncedCause(&diagnosedError{err: s.lastErr, list: err})
			}
		})
	}
	wg.Wait()
}

func (r *Registry) waiting(key *Key) waitState {
	var w waitState
	if key == nil {
		r.mu.Lock()
		w.delays = slices.Sorted(maps.Values(r.delays))
		r.mu.Unlock()
	}
	for _, info := range r.Stores() {
		if key != nil && info.Key != *key {
			continue
		}
		w.total++
		if info.Status.Synced {
			continue
		}
		err := &StoreError{Key: info.Key, Err: notSyncedCause(info.Status.LastError)}
		w.pending = append(w.pending, err)
		if lastErr := info.Status.LastError; lastErr == nil || unexplained(lastErr) && !errors.As(lastErr, new(*diagnosedError)) {
			w.silent = append(w.silent, silentStore{err, lastErr})
		}
		if isPermanent(info.Status.LastError) {
			w.permanent = append(w.permanent, err)
		}
	}
	return w
}

func notSyncedCause(lastErr error) error {
	var bind *bindError
	if errors.As(lastErr, &bind) {
		// A view's names its parent, whose bind failed.
		return fmt.Errorf("cannot start: %w", lastErr)
	}
	if lastErr == nil {
		return errors.New("not synced; no list/watch error reported (the API server may be slow, or the list very large)")
	}
	return fmt.Errorf("not synced; last list/watch error: %w", lastErr)
}

// isPermanent reports list/watch errors that client-go would retry forever
// without success.
func isPermanent(err error) bool {
	var bind *bindError
	return err != nil && (errors.As(err, &bind) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err))
}

// goDiagnose runs diagnose, which lists through c, on a goroutine of the
// registry, unless the registry has stopped or its source cannot list
// plainly. It reports whether diagnose runs. Stop waits for it.
func (r *Registry) goDiagnose(diagnose func(c listChecker)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.src.(listChecker)
	if !ok || r.stopped {
		return false
	}
	r.wg.Go(func() { diagnose(c) })
	return true
}

// healthChanged tells the health handlers of e, and of the stores served
// as views of it, that e began to fail or works again.
func (r *Registry) healthChanged(e *entry) {
	r.mu.Lock()
	affected := []*entry{e}
	for _, o := range r.order {
		if o != e && o.backing().source() == e {
			affected = append(affected, o)
		}
	}
	r.mu.Unlock()
	for _, o := range affected {
		o.notifyHealth()
	}
}

func (r *Registry) signal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signalLocked()
}

// signalLocked is signal with the registry's lock held.
func (r *Registry) signalLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

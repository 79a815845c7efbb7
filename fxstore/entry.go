package fxstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/fxkube/fxkube/internal/caller"
	"github.com/fxkube/fxkube/internal/decode"
	"github.com/fxkube/fxkube/internal/informers"
	"github.com/fxkube/fxkube/internal/primary"
	"github.com/fxkube/fxkube/internal/share"
)

// entry is one store: one informer, shared by every request for its key.
type entry struct {
	key      Key
	registry *Registry
	example  k8sruntime.Object // of the type the store holds
	informer cache.SharedIndexInformer
	lw       lazyListerWatcher

	// Set before the informer runs and read-only afterwards.
	boundResource schema.GroupResource
	notSynced     error
	transform     Transform
	startedAt     time.Time
	// indexes are the indexes the store's requests declared, by name;
	// onInformer names the indexes on the store's informer, its views'
	// among them, with the functions' identities. Both are guarded by the
	// registry's lock.
	indexes    map[string]index
	onInformer map[string]string

	late bool // set before the store starts
	// refs counts the requests for the store, its views' among them; own
	// counts those of its consumers (For and Hold), and lasting those of
	// For, which live as long as the app. ctx is what the store runs in,
	// which stop ends (see Registry.Drop). All are guarded by the
	// registry's lock.
	refs, own, lasting int
	ctx                context.Context
	stop               context.CancelFunc
	// emptying is set once the store's own requests are gone while views
	// remain, which move to other backings (see viewsFollowLocked); moving
	// while the store itself moves. Both are guarded by the registry's
	// lock.
	emptying, moving bool

	// proxy is the informer the store gives out: its backing's. handlers
	// are the handlers added through it, which follow the store from one
	// backing to the next; they are tracked (see informers.Handlers) while
	// trackHandlers is set, for a store that may change backing.
	proxy         *storeInformer
	handlers      *informers.Handlers
	trackHandlers atomic.Bool
	// backed is what serves the store: informer, until the registry
	// serves it from a broader store.
	backed atomic.Pointer[backingRef]
	// planned is set once the registry has chosen the store's backing;
	// parent is then the store it is a view of, nil while it has an
	// informer of its own, and views the stores served as views of it.
	// All three are guarded by the registry's lock.
	planned bool
	parent  *entry
	views   map[*entry]struct{}
	// pinned keeps the store on an informer of its own; guarded by the
	// registry's lock.
	pinned bool
	// unshared turns sharing off (WithoutSharing); guarded by the
	// registry's lock, set before the store starts.
	unshared bool
	// asBytes holds the store's objects as their encoding (HeldAsBytes),
	// decoded by codec on each read; guarded by the registry's lock, set
	// before the store starts. codec is nil for any other store.
	asBytes bool
	codec   *wireCodec
	// shared is the table the store's objects share their parts through,
	// set as the store binds unless it is unshared; nil for a view.
	shared atomic.Pointer[share.Table]
	// decoder decodes the store's objects into shared, reusing the parts
	// it has seen, where its source can decode through one (see
	// decodeThrough); set as the store binds, nil otherwise.
	decoder *decode.Decoder
	// parsed is the key with its selectors parsed, once planning views
	// needs it; guarded by the registry's lock.
	parsed *parsedKey
	// whole is, for a sharded store served from the store of its whole
	// spec, that store; shardViews counts such shards of a whole store.
	// Both are guarded by the registry's lock.
	whole      *entry
	shardViews int
	// served is the store's state as a store that waits for its kind
	// (see served.go).
	served servedState
	// gate is, for a sharded store, the gate its controllers reconcile
	// through (storehooks.Buckets.SetGate); set before any controller
	// asks for it.
	gate primary.Gated

	// synced is set, and syncedCh closed, once the store has synced. A
	// sharded store's turns back while a bucket added to it syncs, and
	// syncedCh is replaced then (see buckets).
	synced   atomic.Bool
	syncedCh atomic.Pointer[chan struct{}]
	received atomic.Int64
	// outsideShard counts the objects the source sent outside the store's
	// shard, dropped.
	outsideShard atomic.Int64
	// warnedKeptDecoded is set once a store held as bytes has warned that
	// it keeps an object decoded (see keptDecoded).
	warnedKeptDecoded atomic.Bool

	mu         sync.Mutex
	consumers  []string
	syncedIn   time.Duration
	lastErr    error
	watchFails int64
	// failingSince is when the store's list/watch last began to fail; zero
	// while it works (see health).
	failingSince time.Time
	// announced is set once the failure that began at failingSince is
	// logged and told to health handlers: at once, or once diagnosed.
	announced bool
	// diagnosis is what a plain list said when the failure began with an
	// error that does not say why (see diagnose).
	diagnosis error
	// healthHandlers hear the store's transitions, by subscription.
	healthHandlers map[*Subscription]HealthHandler
	// onSynced are called once the store has synced (see whenSynced).
	onSynced []func()
}

// newEntry returns a store of example's type backed by an informer of its
// own.
func newEntry(key Key, example k8sruntime.Object, t Transform, r *Registry) *entry {
	e := newStoreEntry(key, r)
	e.example, e.transform = example, t
	e.indexes, e.onInformer = make(map[string]index), make(map[string]string)
	e.informer = e.newInformer()
	e.backed.Store(&backingRef{newOwnInformer(e)})
	return e
}

// newInformer returns an informer for the store, not started.
func (e *entry) newInformer() cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformerWithOptions(&e.lw, e.example, cache.SharedIndexInformerOptions{
		Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		ObjectDescription: e.key.String(),
	})
	// Neither call can fail before the informer has started.
	_ = inf.SetTransform(e.transformObject)
	_ = inf.SetWatchErrorHandlerWithContext(e.watchError)
	return inf
}

// newStoreEntry returns the store of key, with no backing yet.
func newStoreEntry(key Key, r *Registry) *entry {
	e := &entry{key: key, registry: r, notSynced: &StoreError{Key: key, Err: ErrNotSynced}}
	e.syncedCh.Store(new(make(chan struct{})))
	e.proxy = &storeInformer{e}
	e.handlers = informers.NewHandlers(key.String(), func() cache.SharedIndexInformer { return e.backing().informer() }, e.trackHandlers.Load)
	return e
}

// backing returns what serves the store.
func (e *entry) backing() backing { return e.backed.Load().backing }

// add records one more request for the store: its consumer, indexes and
// options, through its backing. The registry's lock is held.
func (e *entry) add(t Transform, req request) error {
	if caller.Identity(t.Func) != caller.Identity(e.transform.Func) {
		return fmt.Errorf("transform %q is already defined with another function; give different transforms different names", t.Name)
	}
	return e.request(req)
}

// request passes req to the store's backing with the indexes it declares
// that the store has not, and records them. The registry's lock is held.
func (e *entry) request(req request) error {
	var added []index
	for _, ix := range req.indexes {
		prev, ok := e.indexes[ix.name]
		if !ok {
			if i := slices.IndexFunc(added, func(a index) bool { return a.name == ix.name }); i >= 0 {
				prev, ok = added[i], true
			}
		}
		switch {
		case !ok:
			added = append(added, ix)
		case prev.fnID != ix.fnID:
			return fmt.Errorf("%s: index %q is already defined with another function; give different indexes different names (%s defined it)",
				ix.call, ix.name, prev.call)
		}
	}
	if err := e.backing().add(req, added); err != nil {
		return err
	}
	for _, ix := range added {
		e.indexes[ix.name] = ix
	}
	if !req.indexOnly {
		e.mu.Lock()
		e.consumers = append(e.consumers, req.consumer)
		e.mu.Unlock()
	}
	return nil
}

// addInformerIndexes declares indexes on the store's informer, each under
// the name names gives it, its function made by wrap. An index there
// already, of the same function, is shared. The registry's lock is held.
func (e *entry) addInformerIndexes(names map[string]string, indexes []index, wrap func(cache.IndexFunc) cache.IndexFunc) error {
	added := cache.Indexers{}
	for _, ix := range indexes {
		name := names[ix.name]
		if id, ok := e.onInformer[name]; ok {
			if id != ix.fnID {
				return fmt.Errorf("%s: the informer of store %s has an index %q of another function", ix.call, e.key, name)
			}
			continue
		}
		added[name] = wrap(ix.fn)
	}
	if err := e.informer.AddIndexers(added); err != nil {
		return fmt.Errorf("add indexes: %w", err)
	}
	for _, ix := range indexes {
		if name := names[ix.name]; added[name] != nil {
			e.onInformer[name] = ix.fnID
		}
	}
	return nil
}

// root returns the store whose informer serves e: its parent if it is a
// view, else e. The registry's lock is held.
func (e *entry) root() *entry {
	if e.parent != nil {
		return e.parent
	}
	return e
}

// bind attaches the store to its source and counts it started. It runs
// before the informer starts.
func (e *entry) bind(b Binding, now time.Time) {
	e.attach(b)
	e.startedAt = now
	e.registry.startedStores.Add(1)
}

// attach attaches the store's informer to its source, before it runs: a
// store's own, or that of a view that moves to an informer of its own.
func (e *entry) attach(b Binding) {
	e.lw.ListerWatcher = b.ListerWatcher
	e.lw.succeeded = e.listWatchSucceeded
	e.lw.failed = func(ctx context.Context, err error) { e.watchError(ctx, nil, err) }
	e.lw.received = &e.received
	// Keys hold canonical shard selectors, which parse.
	e.lw.inShard, _ = shardMatcher(e.key)
	e.lw.outsideShard = e.droppedOutsideShard
	e.boundResource = b.Resource
	if !e.unshared {
		t := e.registry.table(e)
		if old := e.shared.Swap(t); old != nil {
			old.Close()
		}
		e.decodeThrough(b.ListerWatcher, t)
		// The informer has not started: the handler cannot fail.
		_, _ = e.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { t.Held(obj) },
			UpdateFunc: func(_, obj any) { t.Held(obj) },
			DeleteFunc: func(obj any) {
				if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tombstone.Obj
				}
				t.Dropped(obj)
				if e.decoder != nil {
					e.decoder.Dropped(obj)
				}
			},
		})
	}
}

// decodeThrough makes lw, if it can, decode the store's objects into t
// with a decoder that reuses the parts it has seen. Only typed stores
// held decoded, unsharded, whose transform changes no part (the default,
// StripManagedFields, or KeepEverything) decode so: a decoded object
// shares its parts with others before the transform runs.
func (e *entry) decodeThrough(lw cache.ListerWatcher, t *share.Table) {
	target, ok := lw.(decode.Target)
	strip := caller.Identity(e.transform.Func) == caller.Identity(StripManagedFields.Func)
	if !ok || e.asBytes || e.key.Shard != "" || e.key.Projection != Typed || !strip && e.transform.Func != nil {
		return
	}
	var opts []decode.Option
	if strip {
		opts = append(opts, decode.WithoutManagedFields())
	}
	if e.decoder = decode.New(e.example, t, opts...); e.decoder != nil {
		target.DecodeWith(e.decoder)
	}
}

// bindFailed records that the store could not be bound to its source, and
// so will never sync.
func (e *entry) bindFailed(err error) {
	e.mu.Lock()
	e.lastErr = &bindError{err}
	e.mu.Unlock()
	e.registry.log.Error("store cannot start", zap.Stringer("store", e.key), zap.Error(err))
}

// bindFailure returns why the store could not be bound, if it could not.
func (e *entry) bindFailure() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var bind *bindError
	if errors.As(e.lastErr, &bind) {
		return bind
	}
	return nil
}

// takeBindFailure reports whether the store could not be bound, and clears
// that failure so that it can be tried again.
func (e *entry) takeBindFailure() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	var bind *bindError
	if !errors.As(e.lastErr, &bind) {
		return false
	}
	e.lastErr = nil
	return true
}

// bindError is why a store could not be bound: it is permanent.
type bindError struct{ err error }

func (e *bindError) Error() string { return e.err.Error() }
func (e *bindError) Unwrap() error { return e.err }

// runContext returns the context the store runs in, which Registry.Drop
// ends. The registry's lock is held.
func (e *entry) runContext(parent context.Context) context.Context {
	if e.stop != nil {
		e.stop() // of a start that failed
	}
	ctx, cancel := context.WithCancel(parent)
	e.ctx, e.stop = ctx, cancel
	return ctx
}

// awaitSync marks the store synced when done is closed: when its informer
// has synced, or, for a view, its parent.
func (e *entry) awaitSync(ctx context.Context, done <-chan struct{}) {
	select {
	case <-done:
	case <-ctx.Done():
		return
	}
	e.markSynced()
	e.registry.signal()
}

// markSynced marks the store synced, once.
func (e *entry) markSynced() {
	d := time.Since(e.startedAt)
	e.mu.Lock()
	e.syncedIn = d
	e.synced.Store(true)
	onSynced := e.onSynced
	e.onSynced = nil
	e.mu.Unlock()
	close(e.syncedDone())
	e.registry.log.Info("store synced", zap.Stringer("store", e.key), zap.Duration("took", d), zap.Int("objects", e.backing().count()))
	for _, f := range onSynced {
		f()
	}
}

// syncedDone returns the channel closed once the store has synced.
func (e *entry) syncedDone() chan struct{} { return *e.syncedCh.Load() }

// whenSynced calls f once the store has synced: at once if it has.
func (e *entry) whenSynced(f func()) {
	e.mu.Lock()
	if !e.synced.Load() {
		e.onSynced = append(e.onSynced, f)
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	f()
}

func (e *entry) transformObject(obj any) (any, error) {
	if e.key.Projection == Metadata {
		// The metadata API returns PartialObjectMetadata without the kind.
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			m.SetGroupVersionKind(e.key.Kind)
		}
	}
	if e.transform.Func != nil {
		var err error
		if obj, err = e.transform.Func(obj); err != nil {
			return nil, err
		}
	}
	if e.asBytes {
		var old any
		if e.codec.proto {
			old = e.heldBefore(obj)
		}
		h, err := e.codec.encode(obj, old)
		if err == nil {
			return h, nil
		}
		e.keptDecoded(err)
	}
	if t := e.shared.Load(); t != nil {
		t.Take(obj)
	}
	if d := e.registry.detector.Load(); d != nil {
		d.take(e.key, obj)
	}
	return obj, nil
}

// heldBefore returns what the store holds under obj's key: the object obj
// replaces, if any.
func (e *entry) heldBefore(obj any) any {
	old, _, _ := e.informer.GetIndexer().Get(obj)
	return old
}

// keptDecoded records that a store held as bytes keeps an object decoded:
// its encoding would not decode back to it. The store stays correct; it
// only holds that object whole.
func (e *entry) keptDecoded(err error) {
	if e.warnedKeptDecoded.CompareAndSwap(false, true) {
		e.registry.log.Warn("a store held as bytes keeps objects decoded that their encoding would change",
			zap.Stringer("store", e.key), zap.Error(err),
			zap.String("fix", "make the type's MarshalJSON and UnmarshalJSON agree and its transform set only fields JSON keeps, or leave out fxstore.HeldAsBytes()"))
	}
}

// droppedOutsideShard records that the source sent an object outside the
// store's shard: the API server does not apply shard selectors (its
// ShardedListAndWatch feature gate is off). The store stays correct; it
// only receives every object.
func (e *entry) droppedOutsideShard() {
	if e.outsideShard.Add(1) == 1 {
		e.registry.log.Warn("the API server does not apply shard selectors; the store filters its shard on the client, and receives every object",
			zap.Stringer("store", e.key), zap.String("fix", "enable kube-apiserver's ShardedListAndWatch feature gate (alpha since Kubernetes 1.36)"))
	}
}

// held returns how many objects the store holds, and the heap they take.
func (e *entry) held() (objects int, bytes int64) {
	b := e.backing()
	objects = b.count()
	return objects, b.heapBytes(objects)
}

// sampled is how many objects an unshared store sizes to estimate its
// heap.
const sampled = 32

// heapBytes estimates the heap the n objects of the store's own informer,
// whose indexer is given, take. With sharing, its table keeps the count;
// without, a sample of the objects is sized.
func (e *entry) heapBytes(indexer cache.Indexer, n int) int64 {
	if t := e.shared.Load(); t != nil {
		if e.decoder != nil {
			return t.Bytes(n) + e.decoder.Bytes()
		}
		return t.Bytes(n)
	}
	objs := indexer.List()
	if len(objs) == 0 {
		return 0
	}
	step := max(1, len(objs)/sampled)
	var sum, k int64
	for i := 0; i < len(objs); i += step {
		sum += share.Size(objs[i])
		k++
	}
	return sum * int64(n) / k
}

func (e *entry) info() StoreInfo {
	since, failing := e.health()
	e.mu.Lock()
	info := StoreInfo{
		Key:       e.key,
		Consumers: slices.Clone(e.consumers),
		Status: StoreStatus{
			Synced:         e.synced.Load(),
			SyncDuration:   e.syncedIn,
			LastError:      cmp.Or(e.reportedErrLocked(), failing),
			FailingSince:   since,
			OutsideShard:   e.outsideShard.Load(),
			WaitingForKind: e.served.waiting.Load(),
		},
	}
	e.mu.Unlock()
	// The registry's lock is taken before the entry's.
	e.registry.mu.Lock()
	info.Late = e.late
	info.Indexes = slices.Sorted(maps.Keys(e.indexes))
	e.backing().describe(&info)
	e.registry.mu.Unlock()
	info.Status.ShardOnClient = e.key.Shard != "" && (info.ViewOf != nil || info.Status.OutsideShard > 0)
	return info
}

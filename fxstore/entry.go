package fxstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// entry is one store: one informer, shared by every request for its key.
type entry struct {
	key      Key
	registry *Registry
	example  k8sruntime.Object // of the type the store holds
	informer cache.SharedIndexInformer
	lw       lazyListerWatcher

	// Set before the informer runs and read-only afterwards; a view's
	// resource, its parent's, once it has synced.
	resource   schema.GroupResource
	notSynced  error
	transform  Transform
	startedAt  time.Time
	indexFuncs map[string]string
	// indexCalls are the options that declared the indexes, by name.
	indexCalls map[string]string

	late bool // set before the store starts
	// refs counts the requests for the store; stop ends its informer (see
	// Registry.Drop). Both are guarded by the registry's lock.
	refs int
	stop context.CancelFunc

	// proxy is the informer the store gives out: its backing's.
	proxy *storeInformer
	// backed is what serves the store: informer, until the registry
	// serves it from a broader store.
	backed atomic.Pointer[backingRef]
	// pinned keeps the store on an informer of its own; guarded by the
	// registry's lock.
	pinned bool
	// indexers are the requests' indexes, to move to a view's parent;
	// guarded by the registry's lock.
	indexers cache.Indexers
	// parsed is the key with its selectors parsed, once planning views
	// needs it; guarded by the registry's lock.
	parsed *parsedKey
	// whole is, for a sharded store served from the store of its whole
	// spec, that store; shardViews counts such shards of a whole store.
	// Both are guarded by the registry's lock.
	whole      *entry
	shardViews int

	synced   atomic.Bool
	syncedCh chan struct{}
	received atomic.Int64
	// outsideShard counts the objects the source sent outside the store's
	// shard, dropped.
	outsideShard atomic.Int64

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
}

func newEntry(key Key, example k8sruntime.Object, t Transform, r *Registry) *entry {
	e := &entry{
		key:        key,
		registry:   r,
		example:    example,
		transform:  t,
		indexFuncs: make(map[string]string),
		indexCalls: make(map[string]string),
		indexers:   cache.Indexers{},
		syncedCh:   make(chan struct{}),
		notSynced:  &StoreError{Key: key, Err: ErrNotSynced},
	}
	e.proxy = &storeInformer{e}
	e.informer = cache.NewSharedIndexInformerWithOptions(&e.lw, example, cache.SharedIndexInformerOptions{
		Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		ObjectDescription: key.String(),
	})
	// Neither call can fail before the informer has started.
	_ = e.informer.SetTransform(e.transformObject)
	_ = e.informer.SetWatchErrorHandlerWithContext(e.watchError)
	e.backed.Store(&backingRef{ownInformer{e.informer, e}})
	return e
}

// backing returns what serves the store.
func (e *entry) backing() backing { return e.backed.Load().backing }

// add records one more request for the store: its consumer and indexes.
// The registry's lock is held.
func (e *entry) add(t Transform, req request) error {
	if funcIdentity(t.Func) != funcIdentity(e.transform.Func) {
		return fmt.Errorf("transform %q is already defined with another function; give different transforms different names", t.Name)
	}
	added := cache.Indexers{}
	for _, ix := range req.indexes {
		switch id, ok := e.indexFuncs[ix.name]; {
		case !ok:
			added[ix.name] = ix.fn
		case id != ix.fnID:
			return fmt.Errorf("%s: index %q is already defined with another function; give different indexes different names (%s defined it)",
				ix.call, ix.name, e.indexCalls[ix.name])
		}
	}
	if err := e.informer.AddIndexers(added); err != nil {
		return fmt.Errorf("add indexes: %w", err)
	}
	for _, ix := range req.indexes {
		if _, ok := e.indexCalls[ix.name]; !ok {
			e.indexCalls[ix.name] = ix.call
		}
		e.indexFuncs[ix.name] = ix.fnID
		e.indexers[ix.name] = ix.fn
	}
	if req.ownInformer {
		e.pinned = true
	}
	if !req.indexOnly {
		e.mu.Lock()
		e.consumers = append(e.consumers, req.consumer)
		e.mu.Unlock()
	}
	return nil
}

// funcIdentity identifies fn by where its code is written, file and line:
// closures of one function literal share it even where the compiler has
// inlined the function returning them (such as controller-runtime's
// cache.TransformStripManagedFields) into different callers, which gives
// each copy code of its own. Empty for a nil fn.
func funcIdentity(fn any) string {
	v := reflect.ValueOf(fn)
	if !v.IsValid() || v.IsNil() {
		return ""
	}
	f := runtime.FuncForPC(v.Pointer())
	if f == nil {
		return strconv.FormatUint(uint64(v.Pointer()), 16)
	}
	file, line := f.FileLine(f.Entry())
	return file + ":" + strconv.Itoa(line)
}

// bind attaches the store to its source. It runs before the informer starts.
func (e *entry) bind(b Binding, now time.Time) {
	e.lw.ListerWatcher = b.ListerWatcher
	e.lw.succeeded = e.listWatchSucceeded
	e.lw.failed = func(ctx context.Context, err error) { e.watchError(ctx, nil, err) }
	e.lw.received = &e.received
	// Keys hold canonical shard selectors, which parse.
	e.lw.inShard, _ = shardMatcher(e.key)
	e.lw.outsideShard = e.droppedOutsideShard
	e.resource = b.Resource
	e.startedAt = now
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
	e.stop = cancel
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
	e.resource = e.backing().source().resource // a view's parent was bound before it synced
	d := time.Since(e.startedAt)
	e.mu.Lock()
	e.syncedIn = d
	e.mu.Unlock()
	e.synced.Store(true)
	close(e.syncedCh)
	e.registry.log.Info("store synced", zap.Stringer("store", e.key), zap.Duration("took", d), zap.Int("objects", e.count()))
}

func (e *entry) transformObject(obj any) (any, error) {
	if e.key.Projection == Metadata {
		// The metadata API returns PartialObjectMetadata without the kind.
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			m.SetGroupVersionKind(e.key.Kind)
		}
	}
	if e.transform.Func == nil {
		return obj, nil
	}
	return e.transform.Func(obj)
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

// watchError records a list/watch error. The first that is not routine
// marks the store failing. One that does not say why is diagnosed first,
// off the informer's goroutine, so that the failure is announced with its
// cause.
func (e *entry) watchError(ctx context.Context, _ *cache.Reflector, err error) {
	failing := !isRoutine(err)
	now := time.Now()
	e.mu.Lock()
	e.lastErr = err
	e.watchFails++
	began := failing && e.failingSince.IsZero()
	if began {
		e.failingSince = now
	}
	e.mu.Unlock()
	switch {
	case began && unexplained(err) && e.registry.goDiagnose(func(c listChecker) { e.diagnose(ctx, now, c) }):
	case began:
		e.announceFailing(now, nil)
	case failing:
		e.registry.log.Debug("store list/watch failed again; retrying", zap.Stringer("store", e.key), zap.Error(err))
	}
	e.registry.signal()
}

// diagnose lists one object of the store plainly, for the failure that
// began at since, and announces the failure with the list's error. A
// conversion webhook that fails leaves a watch only timeouts ("Too large
// resource version"); a plain list names the webhook and its error.
func (e *entry) diagnose(ctx context.Context, since time.Time, c listChecker) {
	listCtx, cancel := context.WithTimeout(ctx, diagnoseSilentTimeout)
	defer cancel()
	err := c.checkList(listCtx, e.key)
	switch {
	case ctx.Err() != nil:
		return // the store stops
	case listCtx.Err() != nil:
		err = nil // the list says no more than the watch
	}
	e.announceFailing(since, err)
}

// announceFailing logs that the store began to fail at since, with what a
// plain list said if it was diagnosed, and tells its health handlers:
// once per failure, and not once it has recovered.
func (e *entry) announceFailing(since time.Time, diagnosis error) {
	e.mu.Lock()
	current := e.failingSince.Equal(since) && !e.announced
	if current {
		e.announced, e.diagnosis = true, diagnosis
	}
	err := e.reportedErrLocked()
	e.mu.Unlock()
	if !current {
		return
	}
	e.registry.log.Warn("store failing: its list/watch fails, and its objects grow stale while it retries",
		zap.Stringer("store", e.key), zap.Error(err))
	e.registry.healthChanged(e)
}

// reportedErrLocked returns the last list/watch error, with what a plain
// list said when that error does not say why. e.mu is held.
func (e *entry) reportedErrLocked() error {
	if e.diagnosis != nil && unexplained(e.lastErr) {
		return &diagnosedError{err: e.lastErr, list: e.diagnosis}
	}
	return e.lastErr
}

// diagnosedError is a list/watch error that does not say why, with the
// error of a plain list made to find out.
type diagnosedError struct{ err, list error }

func (e *diagnosedError) Error() string {
	return fmt.Sprintf("%v; a plain list of one object says why: %v", e.err, e.list)
}

func (e *diagnosedError) Unwrap() []error { return []error{e.err, e.list} }

// unexplained reports list/watch errors that do not say why: timeouts. A
// conversion webhook that fails gives a watch of the converted version
// only "Too large resource version", a timeout.
func unexplained(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// isRoutine reports list/watch errors that are part of a watch's life: it
// ended (its timeout, or a proxy closing it), or must list again (its
// resource version expired), or the store stops. client-go's default
// watch error handler logs these at debug levels too. So is the error
// event client-go makes of a watch stream that broke (such as when the
// store stops it): the reflector watches again at once, and an API server
// that is away refuses that.
func isRoutine(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || apierrors.HasStatusCause(err, clientWatchDecoding)
}

// clientWatchDecoding is the cause client-go's REST client gives the error
// event it makes when it cannot read a watch stream.
const clientWatchDecoding metav1.CauseType = "ClientWatchDecoding"

// listWatchSucceeded clears the last list/watch error once the source
// works again (see lazyListerWatcher.succeeded), so that a store that has
// recovered, such as one whose CRD was deleted and created again, no longer
// reports an error.
func (e *entry) listWatchSucceeded() {
	e.mu.Lock()
	lastErr, announced := e.reportedErrLocked(), e.announced
	since := e.failingSince
	e.lastErr, e.failingSince, e.announced, e.diagnosis = nil, time.Time{}, false, nil
	e.mu.Unlock()
	// A failure not announced yet, as it was being diagnosed, ends unheard.
	if announced {
		e.registry.log.Info("store recovered", zap.Stringer("store", e.key),
			zap.Duration("failedFor", time.Since(since)), zap.NamedError("previousError", lastErr))
		e.registry.healthChanged(e)
	}
	if lastErr != nil {
		e.registry.signal()
	}
}

// health returns since when the list/watch feeding the store has failed,
// and its last error; since is zero while it works, and while the failure
// is diagnosed. A view's is its parent's.
func (e *entry) health() (since time.Time, err error) {
	src := e.backing().source()
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.failingSince.IsZero() || !src.announced {
		return time.Time{}, nil
	}
	return src.failingSince, src.reportedErrLocked()
}

// failure is what Store.Err returns: nil while the store works.
func (e *entry) failure() error {
	since, err := e.health()
	if since.IsZero() {
		return nil
	}
	return &StoreError{Key: e.key, Err: &FailingError{Since: since, Err: err}}
}

// notifyHealth tells e's health handlers of a transition.
func (e *entry) notifyHealth() {
	err := e.failure()
	e.mu.Lock()
	handlers := slices.Collect(maps.Values(e.healthHandlers))
	e.mu.Unlock()
	for _, h := range handlers {
		h.OnHealth(err)
	}
}

// indexer is what the store reads: its backing's indexer.
func (e *entry) indexer() cache.Indexer { return e.backing().GetIndexer() }

// list returns the store's objects in namespace, or all when it is "".
func (e *entry) list(namespace string) ([]any, error) {
	if namespace == "" {
		return e.indexer().List(), nil
	}
	return e.indexer().ByIndex(cache.NamespaceIndex, namespace)
}

// count returns how many objects the store holds.
func (e *entry) count() int { return len(e.indexer().ListKeys()) }

// viewFilter returns what the store selects of parent's objects, if the
// store can be a view of parent: the client can evaluate it, its objects
// can be made from parent's, and parent has no index of another function
// by the name its own indexes take there. The registry's lock is held.
func (e *entry) viewFilter(parent *entry) (viewSelection, bool) {
	sel, err := viewSelectionOf(parent.parsedKey(), e.parsedKey())
	if err != nil {
		return viewSelection{}, false
	}
	projected := parent.key.Projection != e.key.Projection
	if projected && !hasObjectMeta(parent.example) {
		return viewSelection{}, false
	}
	for name, id := range e.indexFuncs {
		if pid, ok := parent.indexFuncs[parentIndexName(projected, name)]; ok && pid != id {
			return viewSelection{}, false
		}
	}
	return sel, true
}

// parsedKey returns the store's key, parsed. The registry's lock is held.
func (e *entry) parsedKey() *parsedKey {
	if e.parsed == nil {
		e.parsed = parseKey(e.key)
	}
	return e.parsed
}

// parentIndexName is the name an index declared on a view takes on its
// parent's informer. A metadata-only view's index functions take its
// objects, not the parent's: they get names of their own there, wrapped.
func parentIndexName(projected bool, name string) string {
	if projected {
		return "fxstore metadata " + name
	}
	return name
}

// serveAsView makes the store a view of parent, moving its indexes to
// parent's informer, when viewFilter allows. The registry's lock is held.
func (e *entry) serveAsView(parent *entry) bool {
	sel, ok := e.viewFilter(parent)
	if !ok {
		return false
	}
	var project *metadataProjection
	if parent.key.Projection != e.key.Projection {
		project = newMetadataProjection(e.key.Kind)
	}
	moved, names := cache.Indexers{}, make(map[string]string, len(e.indexers))
	for name, fn := range e.indexers {
		pname := parentIndexName(project != nil, name)
		names[name] = pname
		if _, ok := parent.indexFuncs[pname]; !ok {
			moved[pname] = project.indexFunc(fn)
		}
	}
	if err := parent.informer.AddIndexers(moved); err != nil {
		return false
	}
	for name, pname := range names {
		if fn, ok := moved[pname]; ok {
			parent.indexFuncs[pname] = e.indexFuncs[name]
			parent.indexers[pname] = fn
		}
	}
	v, err := newView(parent, e.key, sel, project, names, maps.Clone(e.indexers))
	if err != nil {
		return false
	}
	e.backed.Store(&backingRef{v})
	return true
}

func (e *entry) info() StoreInfo {
	// indexFuncs is guarded by the registry's lock, which is taken before
	// the entry's.
	e.registry.mu.Lock()
	indexes := slices.Sorted(maps.Keys(e.indexFuncs))
	e.registry.mu.Unlock()
	var (
		viewOf    *Key
		parentErr error // why the parent of a view not synced has not synced
	)
	if src := e.backing().source(); src != e {
		viewOf = &src.key
		if !e.synced.Load() {
			src.mu.Lock()
			if err := src.reportedErrLocked(); err != nil {
				parentErr = fmt.Errorf("its store %s: %w", src.key, err)
			}
			src.mu.Unlock()
		}
	}
	since, failing := e.health()
	e.mu.Lock()
	defer e.mu.Unlock()
	lastErr := cmp.Or(e.reportedErrLocked(), parentErr, failing)
	return StoreInfo{
		Key:       e.key,
		ViewOf:    viewOf,
		Consumers: slices.Clone(e.consumers),
		Indexes:   indexes,
		Late:      e.late,
		Status: StoreStatus{
			Synced:        e.synced.Load(),
			SyncDuration:  e.syncedIn,
			LastError:     lastErr,
			FailingSince:  since,
			OutsideShard:  e.outsideShard.Load(),
			ShardOnClient: e.key.Shard != "" && (viewOf != nil || e.outsideShard.Load() > 0),
		},
	}
}

// lazyListerWatcher lets the informer exist, and take handlers and indexers,
// before the store is bound to a source. It counts the objects the source
// sends, in lists and in watches, where they arrive: the informer's
// transform is no place to count, as client-go runs it twice on an initial
// list streamed in a watch (once in the reflector's temporary store, once
// in the queue's Replace). For a sharded store it drops the objects outside
// the shard, which the API server sends when it does not apply shard
// selectors.
//
// It also reports the errors that client-go's reflector handles without
// telling its watch error handler, and when the source works again.
type lazyListerWatcher struct {
	cache.ListerWatcher
	// succeeded is called when the source works: after each list it
	// answers, and after each watch it accepts, unless the last watch ended
	// on an error event; then on the first event a watch delivers.
	succeeded func()
	// failed is called with each error the reflector retries without
	// telling its watch error handler: a watch refused with connection
	// refused or 429 (the API server is away or overloaded), and each error
	// event a watch delivers that is not routine (see isRoutine).
	failed func(context.Context, error)
	// errorEvent is set while the last watch ended on an error event. The
	// reflector watches again at once, and the API server accepts a watch
	// it then ends with the same error, such as when a conversion webhook
	// fails: accepting it is no sign of recovery.
	errorEvent atomic.Bool
	// received counts the objects listed and the watch events received.
	received *atomic.Int64
	// inShard is nil unless the store is sharded; outsideShard is called
	// on each object dropped for being outside the shard.
	inShard      func(k8sruntime.Object) bool
	outsideShard func()
}

func (l *lazyListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (k8sruntime.Object, error) {
	list, err := cache.ToListerWatcherWithContext(l.ListerWatcher).ListWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	l.received.Add(int64(meta.LenList(list)))
	if l.inShard != nil {
		if err := l.keepShard(list); err != nil {
			return nil, err
		}
	}
	l.errorEvent.Store(false)
	if l.succeeded != nil {
		l.succeeded()
	}
	return list, nil
}

// keepShard removes from list the objects outside the shard.
func (l *lazyListerWatcher) keepShard(list k8sruntime.Object) error {
	outside := 0
	_ = meta.EachListItem(list, func(o k8sruntime.Object) error {
		if !l.inShard(o) {
			outside++
		}
		return nil
	})
	if outside == 0 {
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	items = slices.DeleteFunc(items, func(o k8sruntime.Object) bool { return !l.inShard(o) })
	for range outside {
		l.outsideShard()
	}
	return meta.SetList(list, items)
}

func (l *lazyListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := cache.ToListerWatcherWithContext(l.ListerWatcher).WatchWithContext(ctx, opts)
	if err != nil {
		if l.failed != nil && (utilnet.IsConnectionRefused(err) || apierrors.IsTooManyRequests(err)) {
			l.failed(ctx, err)
		}
		return nil, err
	}
	if !l.errorEvent.Load() && l.succeeded != nil {
		l.succeeded()
	}
	return newReceivingWatch(ctx, w, l), nil
}

// delivered records that a watch delivered an event of the source: after
// an error event, the source works again.
func (l *lazyListerWatcher) delivered() {
	// Load first: most events find it unset, and a swap writes.
	if l.errorEvent.Load() && l.errorEvent.CompareAndSwap(true, false) && l.succeeded != nil {
		l.succeeded()
	}
}

// errorEventReceived reports the error of an error event, unless it is
// routine. A watch that ends on one makes the reflector watch again (or
// list, or stream its list again) without telling its watch error handler.
func (l *lazyListerWatcher) errorEventReceived(ctx context.Context, ev watch.Event) {
	err := apierrors.FromObject(ev.Object)
	if isRoutine(err) || ctx.Err() != nil {
		return
	}
	l.errorEvent.Store(true)
	if l.failed != nil {
		l.failed(ctx, err)
	}
}

// IsWatchListSemanticsUnSupported passes on whether the bound source can
// stream its initial list in a watch.
func (l *lazyListerWatcher) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.ListerWatcher)
}

// receivingWatch passes a watch's events on, counting those that carry an
// object of the store (not bookmarks or errors), dropping those outside a
// sharded store's shard, and telling its lazyListerWatcher of events and
// error events. Unlike watch.Filter, its goroutine ends when the watch is
// stopped even if no one reads any more.
type receivingWatch struct {
	in       watch.Interface
	out      chan watch.Event
	stopped  chan struct{}
	stopOnce sync.Once
}

func newReceivingWatch(ctx context.Context, in watch.Interface, l *lazyListerWatcher) *receivingWatch {
	w := &receivingWatch{in: in, out: make(chan watch.Event), stopped: make(chan struct{})}
	go func() {
		defer close(w.out)
		for ev := range in.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				l.received.Add(1)
				l.delivered()
				if l.inShard != nil && !l.inShard(ev.Object) {
					l.outsideShard()
					continue
				}
			case watch.Bookmark:
				l.delivered()
			case watch.Error:
				if !w.isStopped() {
					l.errorEventReceived(ctx, ev)
				}
			}
			select {
			case w.out <- ev:
			case <-w.stopped:
				return
			}
		}
	}()
	return w
}

// ResultChan implements watch.Interface.
func (w *receivingWatch) ResultChan() <-chan watch.Event { return w.out }

// isStopped reports whether the watch was stopped: an error event after
// that is of the stream that broke as it closed.
func (w *receivingWatch) isStopped() bool {
	select {
	case <-w.stopped:
		return true
	default:
		return false
	}
}

// Stop implements watch.Interface.
func (w *receivingWatch) Stop() {
	w.stopOnce.Do(func() { close(w.stopped) })
	w.in.Stop()
}

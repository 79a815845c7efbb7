package fxshard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// shardInformer is a sharded store's informer, as a controller subscribes
// to it: its handlers are added to the informer of every bucket held, and
// of every bucket acquired later (whose objects reach them as Adds, as an
// informer's first list does), and leave a bucket's informer when it is
// given up, without Deletes: its objects are another replica's now, not
// gone. It is never run, configured or stopped, and reads as the union of
// the buckets' informers.
type shardInformer struct {
	mu       sync.Mutex
	buckets  map[int]*bucketInformer
	handlers []*shardRegistration
}

// bucketInformer is the informer of a held bucket's store; ctx ends when
// the bucket is given up.
type bucketInformer struct {
	cache.SharedIndexInformer
	ctx    context.Context
	cancel context.CancelFunc
}

var _ cache.SharedIndexInformer = (*shardInformer)(nil)

// errNotConfigurable is what configuring a sharded store's informer
// returns: each bucket's store is configured by its spec.
var errNotConfigurable = errors.New("fxshard: a sharded store's informer is the union of its buckets' stores; configure the store through its fxstore.Spec and options")

// addBucket adds bucket's informer, and every handler to it.
func (i *shardInformer) addBucket(bucket int, inf cache.SharedIndexInformer) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	added := make(map[*shardRegistration]cache.ResourceEventHandlerRegistration, len(i.handlers))
	for _, h := range i.handlers {
		reg, err := inf.AddEventHandlerWithOptions(h.handler, h.opts)
		if err != nil {
			for _, reg := range added {
				_ = inf.RemoveEventHandler(reg)
			}
			return err
		}
		added[h] = reg
	}
	for h, reg := range added {
		h.regs[bucket] = reg
	}
	ctx, cancel := context.WithCancel(context.Background())
	i.buckets[bucket] = &bucketInformer{SharedIndexInformer: inf, ctx: ctx, cancel: cancel}
	return nil
}

// removeBucket removes bucket's informer and every handler from it.
func (i *shardInformer) removeBucket(bucket int) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	inf, ok := i.buckets[bucket]
	if !ok {
		return nil
	}
	delete(i.buckets, bucket)
	inf.cancel()
	var errs []error
	for _, h := range i.handlers {
		if reg, ok := h.regs[bucket]; ok {
			delete(h.regs, bucket)
			errs = append(errs, inf.RemoveEventHandler(reg))
		}
	}
	return errors.Join(errs...)
}

// held returns the informers of the buckets held now.
func (i *shardInformer) held() []*bucketInformer {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make([]*bucketInformer, 0, len(i.buckets))
	for _, inf := range i.buckets {
		out = append(out, inf)
	}
	return out
}

// AddEventHandler implements cache.SharedInformer.
func (i *shardInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, cache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod implements cache.SharedInformer.
func (i *shardInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, cache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions implements cache.SharedInformer.
func (i *shardInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	r := &shardRegistration{informer: i, handler: h, opts: o, regs: make(map[int]cache.ResourceEventHandlerRegistration), removed: make(chan struct{})}
	for b, inf := range i.buckets {
		reg, err := inf.AddEventHandlerWithOptions(h, o)
		if err != nil {
			for b, reg := range r.regs {
				_ = i.buckets[b].RemoveEventHandler(reg)
			}
			return nil, err
		}
		r.regs[b] = reg
	}
	i.handlers = append(i.handlers, r)
	return r, nil
}

// RemoveEventHandler implements cache.SharedInformer.
func (i *shardInformer) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*shardRegistration)
	if !ok || r.informer != i {
		return fmt.Errorf("fxshard: %T is not a registration of this sharded store's informer", handle)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	n := len(i.handlers)
	if i.handlers = slices.DeleteFunc(i.handlers, func(h *shardRegistration) bool { return h == r }); len(i.handlers) == n {
		return nil // removed already
	}
	close(r.removed)
	var errs []error
	for b, reg := range r.regs {
		errs = append(errs, i.buckets[b].RemoveEventHandler(reg))
	}
	return errors.Join(errs...)
}

// shardRegistration is a handler added to a shardInformer: its
// registration on each held bucket's informer.
type shardRegistration struct {
	informer *shardInformer
	handler  cache.ResourceEventHandler
	opts     cache.HandlerOptions
	regs     map[int]cache.ResourceEventHandlerRegistration // guarded by the informer's lock
	removed  chan struct{}
}

// HasSynced implements cache.ResourceEventHandlerRegistration: the handler
// has had the objects of every bucket held.
func (r *shardRegistration) HasSynced() bool {
	r.informer.mu.Lock()
	defer r.informer.mu.Unlock()
	for _, reg := range r.regs {
		if !reg.HasSynced() {
			return false
		}
	}
	return true
}

// HasSyncedChecker implements cache.ResourceEventHandlerRegistration: done
// once the handler has had the objects of every bucket held now (or given
// up since), or it is removed.
func (r *shardRegistration) HasSyncedChecker() cache.DoneChecker {
	r.informer.mu.Lock()
	var waits []func() <-chan struct{}
	var gone []<-chan struct{}
	for b, reg := range r.regs {
		waits = append(waits, func() <-chan struct{} { return reg.HasSyncedChecker().Done() })
		gone = append(gone, r.informer.buckets[b].ctx.Done())
	}
	r.informer.mu.Unlock()
	return waitAll("sharded store handler", waits, gone, r.removed)
}

// HasSyncedChecker implements cache.SharedInformer: done once every bucket
// held now has synced (or been given up).
func (i *shardInformer) HasSyncedChecker() cache.DoneChecker {
	var waits []func() <-chan struct{}
	var gone []<-chan struct{}
	for _, inf := range i.held() {
		waits = append(waits, func() <-chan struct{} { return inf.HasSyncedChecker().Done() })
		gone = append(gone, inf.ctx.Done())
	}
	return waitAll("sharded store", waits, gone, nil)
}

// waitAll returns a checker done once, for each i, waits[i] is done or
// gone[i] is, or once stop is closed.
func waitAll(name string, waits []func() <-chan struct{}, gone []<-chan struct{}, stop <-chan struct{}) cache.DoneChecker {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, wait := range waits {
			select {
			case <-wait():
			case <-gone[i]:
			case <-stop:
				return
			}
		}
	}()
	return doneChecker{name, done}
}

type doneChecker struct {
	name string
	done chan struct{}
}

func (d doneChecker) Name() string          { return d.name }
func (d doneChecker) Done() <-chan struct{} { return d.done }

// HasSynced implements cache.SharedInformer: every held bucket's informer
// has synced.
func (i *shardInformer) HasSynced() bool {
	for _, inf := range i.held() {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// GetStore implements cache.SharedInformer.
func (i *shardInformer) GetStore() cache.Store { return i.GetIndexer() }

// GetIndexer implements cache.SharedIndexInformer: the union of the held
// buckets' indexers, read-only.
func (i *shardInformer) GetIndexer() cache.Indexer { return shardIndexer{i} }

// GetController implements cache.SharedInformer: the buckets' stores run
// their own.
func (i *shardInformer) GetController() cache.Controller { return nil }

// Run implements cache.SharedInformer: the buckets' stores run, so it only
// waits.
func (i *shardInformer) Run(stop <-chan struct{}) { <-stop }

// RunWithContext implements cache.SharedInformer: it only waits.
func (i *shardInformer) RunWithContext(ctx context.Context) { <-ctx.Done() }

// LastSyncResourceVersion implements cache.SharedInformer: each bucket has
// its own.
func (i *shardInformer) LastSyncResourceVersion() string { return "" }

// SetWatchErrorHandler implements cache.SharedInformer.
func (i *shardInformer) SetWatchErrorHandler(cache.WatchErrorHandler) error {
	return errNotConfigurable
}

// SetWatchErrorHandlerWithContext implements cache.SharedInformer.
func (i *shardInformer) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return errNotConfigurable
}

// SetTransform implements cache.SharedInformer.
func (i *shardInformer) SetTransform(cache.TransformFunc) error { return errNotConfigurable }

// IsStopped implements cache.SharedInformer.
func (i *shardInformer) IsStopped() bool { return false }

// AddIndexers implements cache.SharedIndexInformer; declare indexes with
// the options of fxshard.For, which every bucket's store gets.
func (i *shardInformer) AddIndexers(cache.Indexers) error { return errNotConfigurable }

// shardIndexer reads the held buckets' indexers as one.
type shardIndexer struct{ i *shardInformer }

var _ cache.Indexer = shardIndexer{}

var errReadOnly = errors.New("fxshard: a sharded store's objects are its buckets' stores'; they cannot be written")

func (x shardIndexer) each(f func(cache.Indexer) error) error {
	for _, inf := range x.i.held() {
		if err := f(inf.GetIndexer()); err != nil {
			return err
		}
	}
	return nil
}

func (x shardIndexer) List() []any {
	var out []any
	_ = x.each(func(ix cache.Indexer) error { out = append(out, ix.List()...); return nil })
	return out
}

func (x shardIndexer) ListKeys() []string {
	var out []string
	_ = x.each(func(ix cache.Indexer) error { out = append(out, ix.ListKeys()...); return nil })
	return out
}

func (x shardIndexer) Get(obj any) (any, bool, error) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return x.GetByKey(key)
}

func (x shardIndexer) GetByKey(key string) (any, bool, error) {
	for _, inf := range x.i.held() {
		if item, ok, err := inf.GetIndexer().GetByKey(key); ok || err != nil {
			return item, ok, err
		}
	}
	return nil, false, nil
}

func (x shardIndexer) Index(name string, obj any) ([]any, error) {
	var out []any
	return out, x.each(func(ix cache.Indexer) error {
		items, err := ix.Index(name, obj)
		out = append(out, items...)
		return err
	})
}

func (x shardIndexer) IndexKeys(name, value string) ([]string, error) {
	var out []string
	return out, x.each(func(ix cache.Indexer) error {
		keys, err := ix.IndexKeys(name, value)
		out = append(out, keys...)
		return err
	})
}

func (x shardIndexer) ListIndexFuncValues(name string) []string {
	var out []string
	_ = x.each(func(ix cache.Indexer) error { out = append(out, ix.ListIndexFuncValues(name)...); return nil })
	slices.Sort(out)
	return slices.Compact(out)
}

func (x shardIndexer) ByIndex(name, value string) ([]any, error) {
	var out []any
	return out, x.each(func(ix cache.Indexer) error {
		items, err := ix.ByIndex(name, value)
		out = append(out, items...)
		return err
	})
}

func (x shardIndexer) GetIndexers() cache.Indexers {
	for _, inf := range x.i.held() {
		return inf.GetIndexer().GetIndexers()
	}
	return cache.Indexers{}
}

func (x shardIndexer) AddIndexers(cache.Indexers) error     { return errNotConfigurable }
func (x shardIndexer) Add(any) error                        { return errReadOnly }
func (x shardIndexer) Update(any) error                     { return errReadOnly }
func (x shardIndexer) Delete(any) error                     { return errReadOnly }
func (x shardIndexer) Replace([]any, string) error          { return errReadOnly }
func (x shardIndexer) Resync() error                        { return nil }
func (x shardIndexer) Bookmark(string)                      {}
func (x shardIndexer) LastStoreSyncResourceVersion() string { return "" }

package informers

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

	"k8s.io/client-go/tools/cache"
)

// Union is one informer over the informers of its members, keyed by K,
// which come and go while it runs:
//
//   - a handler added to the union is added to every member, present and
//     future; a member added later gives it its objects as Adds, as an
//     informer's first list does;
//   - a member removed takes the union's handlers with it, without Delete
//     events: its objects are elsewhere now, not gone;
//   - reads are the union of the members' indexers, in key order; they
//     see a member added before its objects reach the handlers;
//   - it has synced once every member has.
//
// The members run on their own; the union is never run, configured or
// stopped. The zero value is not usable; call NewUnion.
type Union[K cmp.Ordered] struct {
	name string

	mu       sync.Mutex
	members  map[K]*member
	handlers []*unionRegistration[K]
	indexers cache.Indexers // added to every member, present and future

	// held is the members in key order, for reads to take without the
	// lock; replaced, never changed, under mu.
	held atomic.Pointer[[]*member]
}

type member struct {
	cache.SharedIndexInformer
	gone chan struct{} // closed once the member is removed
}

var _ cache.SharedIndexInformer = (*Union[int])(nil)

// NewUnion returns a union with no members; name describes it in errors
// and checkers.
func NewUnion[K cmp.Ordered](name string) *Union[K] {
	u := &Union[K]{name: name, members: make(map[K]*member)}
	u.held.Store(&[]*member{})
	return u
}

// Add adds inf as the member k, with every handler and index of the union.
func (u *Union[K]) Add(k K, inf cache.SharedIndexInformer) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.members[k]; ok {
		return fmt.Errorf("%s: member %v added twice", u.name, k)
	}
	// A member added again, or made with the index, has it already:
	// client-go refuses an index name twice.
	missing := cache.Indexers{}
	has := inf.GetIndexer().GetIndexers()
	for name, fn := range u.indexers {
		if _, ok := has[name]; !ok {
			missing[name] = fn
		}
	}
	if len(missing) > 0 {
		if err := inf.AddIndexers(missing); err != nil {
			return fmt.Errorf("%s: member %v: %w", u.name, k, err)
		}
	}
	m := &member{SharedIndexInformer: inf, gone: make(chan struct{})}
	// Reads see the member before its objects reach the handlers, which
	// may read them.
	u.members[k] = m
	u.publish()
	added := make(map[*unionRegistration[K]]cache.ResourceEventHandlerRegistration, len(u.handlers))
	for _, h := range u.handlers {
		reg, err := inf.AddEventHandlerWithOptions(h.handler, h.opts)
		if err != nil {
			for _, reg := range added {
				_ = inf.RemoveEventHandler(reg)
			}
			delete(u.members, k)
			u.publish()
			return fmt.Errorf("%s: member %v: %w", u.name, k, err)
		}
		added[h] = reg
	}
	for h, reg := range added {
		h.regs[m] = reg
	}
	return nil
}

// Remove removes the member k and the union's handlers from it. Removing
// a member not held does nothing.
func (u *Union[K]) Remove(k K) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	m, ok := u.members[k]
	if !ok {
		return nil
	}
	delete(u.members, k)
	u.publish()
	close(m.gone)
	var errs []error
	for _, h := range u.handlers {
		if reg, ok := h.regs[m]; ok {
			delete(h.regs, m)
			errs = append(errs, m.RemoveEventHandler(reg))
		}
	}
	return errors.Join(errs...)
}

// publish replaces held with the members now. u.mu is held.
func (u *Union[K]) publish() {
	keys := slices.Sorted(maps.Keys(u.members))
	held := make([]*member, len(keys))
	for i, k := range keys {
		held[i] = u.members[k]
	}
	u.held.Store(&held)
}

func (u *Union[K]) current() []*member { return *u.held.Load() }

// AddEventHandler implements cache.SharedInformer.
func (u *Union[K]) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return u.AddEventHandlerWithOptions(h, cache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod implements cache.SharedInformer.
func (u *Union[K]) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return u.AddEventHandlerWithOptions(h, cache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions implements cache.SharedInformer.
func (u *Union[K]) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := &unionRegistration[K]{union: u, handler: h, opts: o, regs: make(map[*member]cache.ResourceEventHandlerRegistration), removed: make(chan struct{})}
	for _, m := range u.members {
		reg, err := m.AddEventHandlerWithOptions(h, o)
		if err != nil {
			for m, reg := range r.regs {
				_ = m.RemoveEventHandler(reg)
			}
			return nil, err
		}
		r.regs[m] = reg
	}
	u.handlers = append(u.handlers, r)
	return r, nil
}

// RemoveEventHandler implements cache.SharedInformer. Removing a handler
// again does nothing.
func (u *Union[K]) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*unionRegistration[K])
	if !ok || r.union != u {
		return fmt.Errorf("%s: %T is not a registration of this informer", u.name, handle)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	n := len(u.handlers)
	if u.handlers = slices.DeleteFunc(u.handlers, func(h *unionRegistration[K]) bool { return h == r }); len(u.handlers) == n {
		return nil
	}
	close(r.removed)
	var errs []error
	for m, reg := range r.regs {
		errs = append(errs, m.RemoveEventHandler(reg))
	}
	clear(r.regs)
	return errors.Join(errs...)
}

// unionRegistration is a handler added to a Union: its registration on
// each member.
type unionRegistration[K cmp.Ordered] struct {
	union   *Union[K]
	handler cache.ResourceEventHandler
	opts    cache.HandlerOptions
	regs    map[*member]cache.ResourceEventHandlerRegistration // guarded by the union's lock
	removed chan struct{}
}

// HasSynced implements cache.ResourceEventHandlerRegistration: the handler
// has had the objects of every member.
func (r *unionRegistration[K]) HasSynced() bool {
	r.union.mu.Lock()
	defer r.union.mu.Unlock()
	for _, reg := range r.regs {
		if !reg.HasSynced() {
			return false
		}
	}
	return true
}

// HasSyncedChecker implements cache.ResourceEventHandlerRegistration: done
// once the handler has had the objects of every member now (or removed
// since), or the handler is removed.
func (r *unionRegistration[K]) HasSyncedChecker() cache.DoneChecker {
	r.union.mu.Lock()
	waits := make([]Wait, 0, len(r.regs))
	for m, reg := range r.regs {
		waits = append(waits, Wait{Done: func() <-chan struct{} { return reg.HasSyncedChecker().Done() }, Gone: m.gone})
	}
	r.union.mu.Unlock()
	return AllDone(r.union.name+" handler", r.removed, waits...)
}

// HasSynced implements cache.SharedInformer: every member has synced.
func (u *Union[K]) HasSynced() bool {
	for _, m := range u.current() {
		if !m.HasSynced() {
			return false
		}
	}
	return true
}

// HasSyncedChecker implements cache.SharedInformer: done once every member
// now has synced (or been removed).
func (u *Union[K]) HasSyncedChecker() cache.DoneChecker {
	held := u.current()
	waits := make([]Wait, len(held))
	for i, m := range held {
		waits[i] = Wait{Done: func() <-chan struct{} { return m.HasSyncedChecker().Done() }, Gone: m.gone}
	}
	return AllDone(u.name, nil, waits...)
}

// IsStopped implements cache.SharedInformer: a member has stopped.
func (u *Union[K]) IsStopped() bool {
	return slices.ContainsFunc(u.current(), func(m *member) bool { return m.IsStopped() })
}

// AddIndexers implements cache.SharedIndexInformer: the indexes are added
// to every member, present and future.
func (u *Union[K]) AddIndexers(indexers cache.Indexers) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	for _, m := range u.members {
		errs = append(errs, m.AddIndexers(indexers))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if u.indexers == nil {
		u.indexers = cache.Indexers{}
	}
	maps.Copy(u.indexers, indexers)
	return nil
}

// GetStore implements cache.SharedInformer.
func (u *Union[K]) GetStore() cache.Store { return unionIndexer[K]{u: u} }

// GetIndexer implements cache.SharedIndexInformer: the members' indexers
// read as one, read-only.
func (u *Union[K]) GetIndexer() cache.Indexer { return unionIndexer[K]{u: u} }

// GetController implements cache.SharedInformer: the members run their
// own.
func (u *Union[K]) GetController() cache.Controller { return nil }

// Run implements cache.SharedInformer: the members run, so it only waits.
func (u *Union[K]) Run(stop <-chan struct{}) { <-stop }

// RunWithContext implements cache.SharedInformer: it only waits.
func (u *Union[K]) RunWithContext(ctx context.Context) { <-ctx.Done() }

// LastSyncResourceVersion implements cache.SharedInformer: each member has
// its own.
func (u *Union[K]) LastSyncResourceVersion() string { return "" }

// SetWatchErrorHandler implements cache.SharedInformer: the members watch.
func (u *Union[K]) SetWatchErrorHandler(cache.WatchErrorHandler) error { return u.notConfigurable() }

// SetWatchErrorHandlerWithContext implements cache.SharedInformer.
func (u *Union[K]) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return u.notConfigurable()
}

// SetTransform implements cache.SharedInformer: the members transform.
func (u *Union[K]) SetTransform(cache.TransformFunc) error { return u.notConfigurable() }

func (u *Union[K]) notConfigurable() error {
	return fmt.Errorf("%s is the union of other stores' informers; configure those stores through their specs and options", u.name)
}

// unionIndexer reads the members' indexers as one.
type unionIndexer[K cmp.Ordered] struct {
	readOnly
	u *Union[K]
}

var _ cache.Indexer = unionIndexer[int]{}

func (x unionIndexer[K]) List() []any {
	out, _ := gather(x.u, func(ix cache.Indexer) ([]any, error) { return ix.List(), nil })
	return out
}

func (x unionIndexer[K]) ListKeys() []string {
	out, _ := gather(x.u, func(ix cache.Indexer) ([]string, error) { return ix.ListKeys(), nil })
	return out
}

func (x unionIndexer[K]) Get(obj any) (any, bool, error) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return x.GetByKey(key)
}

func (x unionIndexer[K]) GetByKey(key string) (any, bool, error) {
	for _, m := range x.u.current() {
		if item, ok, err := m.GetIndexer().GetByKey(key); ok || err != nil {
			return item, ok, err
		}
	}
	return nil, false, nil
}

func (x unionIndexer[K]) Index(name string, obj any) ([]any, error) {
	return gather(x.u, func(ix cache.Indexer) ([]any, error) { return ix.Index(name, obj) })
}

func (x unionIndexer[K]) ByIndex(name, value string) ([]any, error) {
	return gather(x.u, func(ix cache.Indexer) ([]any, error) { return ix.ByIndex(name, value) })
}

func (x unionIndexer[K]) IndexKeys(name, value string) ([]string, error) {
	return gather(x.u, func(ix cache.Indexer) ([]string, error) { return ix.IndexKeys(name, value) })
}

// gather returns what read returns of each member's indexer, in member
// key order, in one slice allocated once.
func gather[K cmp.Ordered, V any](u *Union[K], read func(cache.Indexer) ([]V, error)) ([]V, error) {
	held := u.current()
	if len(held) == 1 {
		return read(held[0].GetIndexer())
	}
	var buf [16][]V // a member per bucket, as many as fxshard's default
	parts := buf[:0]
	for _, m := range held {
		part, err := read(m.GetIndexer())
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	return slices.Concat(parts...), nil
}

func (x unionIndexer[K]) ListIndexFuncValues(name string) []string {
	var out []string
	for _, m := range x.u.current() {
		out = append(out, m.GetIndexer().ListIndexFuncValues(name)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (x unionIndexer[K]) GetIndexers() cache.Indexers {
	if held := x.u.current(); len(held) > 0 {
		return held[0].GetIndexer().GetIndexers()
	}
	x.u.mu.Lock()
	defer x.u.mu.Unlock()
	out := cache.Indexers{}
	maps.Copy(out, x.u.indexers)
	return out
}

func (x unionIndexer[K]) LastStoreSyncResourceVersion() string { return "" }

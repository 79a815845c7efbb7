package informers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"
)

// Filter says which of a parent informer's objects a Filtered informer
// holds, how it makes them, and how it finds them in the parent's indexes.
type Filter struct {
	// Name and Parent describe the filtered informer and its parent in
	// errors.
	Name, Parent string
	// Match reports whether an object of the parent's is one of the
	// filtered informer's. It is never given a tombstone.
	Match func(obj any) bool
	// Project makes the filtered informer's objects from the parent's;
	// nil passes them as they are.
	Project Projection
	// ListIndex names an index of the parent's that files each object
	// Match selects under its namespace and under AllNamespaces, so that
	// lists read the filtered objects only. Empty, Namespace tells them:
	// the filter selects by namespace only, the parent's objects in
	// Namespace, or all of them when it is "".
	ListIndex string
	Namespace string
}

// AllNamespaces is the value a Filter's ListIndex files every object
// under; no namespace has this name.
const AllNamespaces = "\x00all"

// Projection makes a filtered informer's objects from its parent's.
type Projection interface {
	// One returns obj's projection; a tombstone's holds its object's.
	One(obj any) any
	// All replaces items by their projections, in place.
	All(items []any) []any
}

// Filtered is the objects of a parent informer that a Filter selects, as
// an informer of their own would hold them: no watch and no copy. Its
// handlers get the events a watch of its own spec would send: an update
// that makes an object match is an Add, one that makes it stop matching a
// Delete of the last matching object. It is never run, configured or
// stopped; Close takes its handlers off the parent.
type Filtered struct {
	parent  cache.SharedIndexInformer
	filter  Filter
	indexer *filteredIndexer
	// indexes are the filtered informer's indexes (SetIndexes); nil,
	// they are the parent's.
	indexes atomic.Pointer[filteredIndexes]

	// regs are the handlers added through the filter, which leave the
	// parent when it closes.
	mu     sync.Mutex
	regs   map[cache.ResourceEventHandlerRegistration]struct{}
	closed bool
}

var _ cache.SharedIndexInformer = (*Filtered)(nil)

// NewFiltered returns the informer of the objects f selects of parent's.
func NewFiltered(parent cache.SharedIndexInformer, f Filter) *Filtered {
	i := &Filtered{parent: parent, filter: f, regs: make(map[cache.ResourceEventHandlerRegistration]struct{})}
	i.indexer = &filteredIndexer{parent: parent.GetIndexer(), f: &i.filter, indexes: &i.indexes}
	return i
}

// filteredIndexes are a filtered informer's indexes: their names on the
// parent's informer, by their own, and their functions, which take the
// filtered informer's objects.
type filteredIndexes struct {
	names    map[string]string
	indexers cache.Indexers
}

// SetIndexes sets the filtered informer's indexes: names maps each to its
// name on the parent's informer, and indexers holds their functions,
// taking the filtered informer's objects. Reads of an index not in names
// fail afterwards, as an informer's do, even where the parent has an
// index of that name; the namespace index is always the parent's. Neither map may change afterwards.
func (i *Filtered) SetIndexes(names map[string]string, indexers cache.Indexers) {
	i.indexes.Store(&filteredIndexes{names: names, indexers: indexers})
}

// Close removes the handlers added through i from the parent; adding
// handlers fails afterwards.
func (i *Filtered) Close() {
	i.mu.Lock()
	defer i.mu.Unlock()
	for reg := range i.regs {
		_ = i.parent.RemoveEventHandler(reg)
	}
	clear(i.regs)
	i.closed = true
}

// AddEventHandler implements cache.SharedInformer.
func (i *Filtered) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, cache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod implements cache.SharedInformer.
func (i *Filtered) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, cache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions implements cache.SharedInformer.
func (i *Filtered) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return nil, fmt.Errorf("store %s was dropped; ask for it again", i.filter.Name)
	}
	reg, err := i.parent.AddEventHandlerWithOptions(filteredHandler{h, &i.filter}, o)
	if err == nil {
		i.regs[reg] = struct{}{}
	}
	return reg, err
}

// RemoveEventHandler implements cache.SharedInformer.
func (i *Filtered) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, ok := i.regs[reg]; !ok {
		return nil // removed when it closed, or never its
	}
	delete(i.regs, reg)
	return i.parent.RemoveEventHandler(reg)
}

// GetStore implements cache.SharedInformer.
func (i *Filtered) GetStore() cache.Store { return i.indexer }

// GetIndexer implements cache.SharedIndexInformer.
func (i *Filtered) GetIndexer() cache.Indexer { return i.indexer }

// AddIndexers implements cache.SharedIndexInformer: they are the parent's.
func (i *Filtered) AddIndexers(indexers cache.Indexers) error { return i.parent.AddIndexers(indexers) }

// GetController implements cache.SharedInformer.
func (i *Filtered) GetController() cache.Controller { return i.parent.GetController() }

// HasSynced implements cache.SharedInformer: the parent has synced.
func (i *Filtered) HasSynced() bool { return i.parent.HasSynced() }

// HasSyncedChecker implements cache.SharedInformer.
func (i *Filtered) HasSyncedChecker() cache.DoneChecker { return i.parent.HasSyncedChecker() }

// LastSyncResourceVersion implements cache.SharedInformer: the parent's.
func (i *Filtered) LastSyncResourceVersion() string { return i.parent.LastSyncResourceVersion() }

// IsStopped implements cache.SharedInformer: the parent has stopped.
func (i *Filtered) IsStopped() bool { return i.parent.IsStopped() }

// Run implements cache.SharedInformer: the parent runs, so it only waits.
func (i *Filtered) Run(stop <-chan struct{}) { <-stop }

// RunWithContext implements cache.SharedInformer: it only waits.
func (i *Filtered) RunWithContext(ctx context.Context) { <-ctx.Done() }

// SetTransform implements cache.SharedInformer: the objects are the
// parent's, transformed already.
func (i *Filtered) SetTransform(cache.TransformFunc) error {
	return fmt.Errorf("store %s is a view of %s; it takes its transform", i.filter.Name, i.filter.Parent)
}

// SetWatchErrorHandler implements cache.SharedInformer: there is no watch.
func (i *Filtered) SetWatchErrorHandler(cache.WatchErrorHandler) error {
	return fmt.Errorf("store %s is a view of %s; it has no watch of its own", i.filter.Name, i.filter.Parent)
}

// SetWatchErrorHandlerWithContext implements cache.SharedInformer.
func (i *Filtered) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return i.SetWatchErrorHandler(nil)
}

// matches reports whether item, perhaps a tombstone, is f's.
func (f *Filter) matches(item any) bool {
	if d, ok := item.(cache.DeletedFinalStateUnknown); ok {
		item = d.Obj
	}
	return f.Match(item)
}

func (f *Filter) one(obj any) any {
	if f.Project == nil {
		return obj
	}
	return f.Project.One(obj)
}

func (f *Filter) all(items []any) []any {
	if f.Project == nil || len(items) == 0 {
		return items
	}
	return f.Project.All(items)
}

// filteredHandler passes on the events of the filter's objects.
type filteredHandler struct {
	cache.ResourceEventHandler
	f *Filter
}

// OnAdd implements cache.ResourceEventHandler.
func (h filteredHandler) OnAdd(obj any, isInInitialList bool) {
	if h.f.matches(obj) {
		h.ResourceEventHandler.OnAdd(h.f.one(obj), isInInitialList)
	}
}

// OnUpdate implements cache.ResourceEventHandler.
func (h filteredHandler) OnUpdate(oldObj, newObj any) {
	switch was, is := h.f.matches(oldObj), h.f.matches(newObj); {
	case was && is:
		h.ResourceEventHandler.OnUpdate(h.f.one(oldObj), h.f.one(newObj))
	case is:
		h.ResourceEventHandler.OnAdd(h.f.one(newObj), false)
	case was:
		h.ResourceEventHandler.OnDelete(h.f.one(oldObj))
	}
}

// OnDelete implements cache.ResourceEventHandler. A tombstone is passed on
// when the object it holds matched.
func (h filteredHandler) OnDelete(obj any) {
	if h.f.matches(obj) {
		h.ResourceEventHandler.OnDelete(h.f.one(obj))
	}
}

// filteredIndexer is the parent's indexer, filtered.
type filteredIndexer struct {
	readOnly
	parent  cache.Indexer
	f       *Filter
	indexes *atomic.Pointer[filteredIndexes]
}

var _ cache.Indexer = (*filteredIndexer)(nil)

func (x *filteredIndexer) filter(items []any) []any {
	out := items[:0:0]
	for _, item := range items {
		if x.f.matches(item) {
			out = append(out, item)
		}
	}
	return x.f.all(out)
}

// parentIndex returns the name the index name has on the parent.
func (x *filteredIndexer) parentIndex(name string) (string, error) {
	ix := x.indexes.Load()
	if ix == nil || name == cache.NamespaceIndex {
		return name, nil
	}
	if n, ok := ix.names[name]; ok {
		return n, nil
	}
	// client-go's indexer says the same.
	return "", fmt.Errorf("index with name %s does not exist", name)
}

// List implements cache.Store.
func (x *filteredIndexer) List() []any { return x.InNamespace("") }

// ListKeys implements cache.Store.
func (x *filteredIndexer) ListKeys() []string {
	var keys []string
	switch {
	case x.f.ListIndex != "":
		keys, _ = x.parent.IndexKeys(x.f.ListIndex, AllNamespaces)
	case x.f.Namespace == "":
		keys = x.parent.ListKeys()
	default:
		keys, _ = x.parent.IndexKeys(cache.NamespaceIndex, x.f.Namespace)
	}
	return keys
}

// InNamespace returns the filtered objects in namespace ("" for all).
func (x *filteredIndexer) InNamespace(namespace string) []any {
	var items []any
	switch {
	case x.f.ListIndex != "":
		items, _ = x.parent.ByIndex(x.f.ListIndex, cmpOr(namespace, AllNamespaces))
	case x.f.Namespace != "" && namespace != "" && x.f.Namespace != namespace:
		return []any{}
	case x.f.Namespace == "" && namespace == "":
		items = x.parent.List()
	default:
		items, _ = x.parent.ByIndex(cache.NamespaceIndex, cmpOr(namespace, x.f.Namespace))
	}
	return x.f.all(items)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Get implements cache.Store.
func (x *filteredIndexer) Get(obj any) (any, bool, error) {
	item, exists, err := x.parent.Get(obj)
	if err != nil || !exists || !x.f.Match(item) {
		return nil, false, err
	}
	return x.f.one(item), true, nil
}

// GetByKey implements cache.Store.
func (x *filteredIndexer) GetByKey(key string) (any, bool, error) {
	item, exists, err := x.parent.GetByKey(key)
	if err != nil || !exists || !x.f.Match(item) {
		return nil, false, err
	}
	return x.f.one(item), true, nil
}

// Index implements cache.Indexer.
func (x *filteredIndexer) Index(name string, obj any) ([]any, error) {
	parent, err := x.parentIndex(name)
	if err != nil {
		return nil, err
	}
	items, err := x.parent.Index(parent, obj)
	return x.filter(items), err
}

// IndexKeys implements cache.Indexer.
func (x *filteredIndexer) IndexKeys(name, value string) ([]string, error) {
	items, err := x.ByIndex(name, value)
	return keysOf(items), err
}

// ByIndex implements cache.Indexer.
func (x *filteredIndexer) ByIndex(name, value string) ([]any, error) {
	if name == cache.NamespaceIndex {
		return x.InNamespace(value), nil
	}
	parent, err := x.parentIndex(name)
	if err != nil {
		return nil, err
	}
	items, err := x.parent.ByIndex(parent, value)
	return x.filter(items), err
}

// ListIndexFuncValues implements cache.Indexer: the parent's values, which
// may include values of objects the filter leaves out.
func (x *filteredIndexer) ListIndexFuncValues(name string) []string {
	parent, err := x.parentIndex(name)
	if err != nil {
		return nil
	}
	return x.parent.ListIndexFuncValues(parent)
}

// GetIndexers implements cache.Indexer.
func (x *filteredIndexer) GetIndexers() cache.Indexers {
	if ix := x.indexes.Load(); ix != nil {
		return ix.indexers
	}
	return x.parent.GetIndexers()
}

// LastStoreSyncResourceVersion implements cache.Store: the parent's.
func (x *filteredIndexer) LastStoreSyncResourceVersion() string {
	return x.parent.LastStoreSyncResourceVersion()
}

package fxstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// view serves a store from the informer of a broader one (its parent),
// filtered: no informer, no watch and no copy of its own.
type view struct {
	key    Key
	parent *entry
	match  func(client.Object) bool
	// project makes the view's objects from the parent's: nil when they are
	// the same (see metadataProjection).
	project *metadataProjection
	indexer *viewIndexer
	shared  *viewInformer
}

// newView returns the view of parent whose objects are those sel selects
// of parent's (key's objects), made by project, with its indexes by the
// names indexNames gives them on parent. Unless sel selects by namespace
// only, it adds to parent's informer an index of the view's objects by
// namespace (and all of them under allNamespaces), so that listing the
// view reads its objects only: an index holds keys, not objects. A view by
// namespace only lists from parent's own namespace index.
func newView(parent *entry, key Key, sel viewSelection, project *metadataProjection, indexNames map[string]string) (*view, error) {
	match := sel.matcher()
	v := &view{key: key, parent: parent, match: match, project: project}
	x := &viewIndexer{Indexer: parent.informer.GetIndexer(), match: v.matches, project: project, indexNames: indexNames}
	if sel.namespaceOnly() {
		x.namespace, x.byNamespace = sel.namespace, true
	} else if x.index = "fxstore view " + key.String(); parent.informer.GetIndexer().GetIndexers()[x.index] == nil {
		// A view of the same key before it (a shard given up and taken
		// again) left its index, of the same function: it is kept.
		err := parent.informer.AddIndexers(cache.Indexers{x.index: func(obj any) ([]string, error) {
			o, ok := obj.(client.Object)
			if !ok || !match(o) {
				return nil, nil
			}
			return []string{o.GetNamespace(), allNamespaces}, nil
		}})
		if err != nil {
			return nil, err
		}
	}
	v.indexer = x
	v.shared = &viewInformer{SharedIndexInformer: parent.informer, view: v, regs: make(map[cache.ResourceEventHandlerRegistration]struct{})}
	return v, nil
}

// close ends the view, as Registry.Drop does: its handlers leave the
// parent's informer. Its index stays there, kept up to date, for a view of
// the same key: client-go cannot remove an index. For a shard, that is at
// most one index per bucket the process ever held.
func (v *view) close() {
	v.shared.mu.Lock()
	defer v.shared.mu.Unlock()
	for reg := range v.shared.regs {
		_ = v.parent.informer.RemoveEventHandler(reg)
	}
	clear(v.shared.regs)
	v.shared.closed = true
}

// allNamespaces is the value a view's index files every object under; no
// namespace has this name.
const allNamespaces = "\x00all"

func (v *view) matches(item any) bool {
	if d, ok := item.(cache.DeletedFinalStateUnknown); ok {
		item = d.Obj
	}
	obj, ok := item.(client.Object)
	return ok && v.match(obj)
}

// errViewWrite is what writing to a view's indexer returns.
var errViewWrite = errors.New("fxstore: a view's objects are its parent store's; they cannot be written")

// viewIndexer is the parent store's indexer, filtered to the view's
// objects. It is what a view's Store reads, and what its informer's
// GetIndexer and GetStore give controller-runtime.
type viewIndexer struct {
	cache.Indexer // the parent's
	match         func(any) bool
	project       *metadataProjection
	index         string            // of the view's objects, by namespace
	indexNames    map[string]string // the view's indexes' names on the parent
	// byNamespace is set, and index empty, when the view selects by
	// namespace only: its objects are the parent's in namespace, or all of
	// them when namespace is "".
	byNamespace bool
	namespace   string
	// indexers are the view's own index functions when project is set
	// (the parent's take the parent's objects); else the parent's serve.
	indexers cache.Indexers
}

var _ cache.Indexer = (*viewIndexer)(nil)

func (x *viewIndexer) filter(items []any) []any {
	out := items[:0:0]
	for _, item := range items {
		if x.match(item) {
			out = append(out, item)
		}
	}
	return x.project.all(out)
}

func keysOf(items []any) []string {
	keys := make([]string, 0, len(items))
	for _, item := range items {
		if k, err := cache.MetaNamespaceKeyFunc(item); err == nil {
			keys = append(keys, k)
		}
	}
	return keys
}

// parentIndex returns the name of the view's index name on the parent.
func (x *viewIndexer) parentIndex(name string) string {
	if n, ok := x.indexNames[name]; ok {
		return n
	}
	return name
}

// List implements cache.Store.
func (x *viewIndexer) List() []any {
	var items []any
	switch {
	case !x.byNamespace:
		items, _ = x.Indexer.ByIndex(x.index, allNamespaces)
	case x.namespace == "":
		items = x.Indexer.List()
	default:
		items, _ = x.Indexer.ByIndex(cache.NamespaceIndex, x.namespace)
	}
	return x.project.all(items)
}

// ListKeys implements cache.Store.
func (x *viewIndexer) ListKeys() []string {
	var keys []string
	switch {
	case !x.byNamespace:
		keys, _ = x.Indexer.IndexKeys(x.index, allNamespaces)
	case x.namespace == "":
		keys = x.Indexer.ListKeys()
	default:
		keys, _ = x.Indexer.IndexKeys(cache.NamespaceIndex, x.namespace)
	}
	return keys
}

// inNamespace returns the view's objects in namespace ("" for all).
func (x *viewIndexer) inNamespace(namespace string) []any {
	switch {
	case namespace == "":
		return x.List()
	case !x.byNamespace:
		items, _ := x.Indexer.ByIndex(x.index, namespace)
		return x.project.all(items)
	case x.namespace != "" && x.namespace != namespace:
		return []any{}
	}
	items, _ := x.Indexer.ByIndex(cache.NamespaceIndex, namespace)
	return x.project.all(items)
}

// Get implements cache.Store.
func (x *viewIndexer) Get(obj any) (any, bool, error) {
	item, exists, err := x.Indexer.Get(obj)
	if err != nil || !exists || !x.match(item) {
		return nil, false, err
	}
	return x.project.one(item), true, nil
}

// GetByKey implements cache.Store.
func (x *viewIndexer) GetByKey(key string) (any, bool, error) {
	item, exists, err := x.Indexer.GetByKey(key)
	if err != nil || !exists || !x.match(item) {
		return nil, false, err
	}
	return x.project.one(item), true, nil
}

// Index implements cache.Indexer.
func (x *viewIndexer) Index(indexName string, obj any) ([]any, error) {
	items, err := x.Indexer.Index(x.parentIndex(indexName), obj)
	return x.filter(items), err
}

// IndexKeys implements cache.Indexer.
func (x *viewIndexer) IndexKeys(indexName, indexedValue string) ([]string, error) {
	items, err := x.ByIndex(indexName, indexedValue)
	return keysOf(items), err
}

// ByIndex implements cache.Indexer.
func (x *viewIndexer) ByIndex(indexName, indexedValue string) ([]any, error) {
	if indexName == cache.NamespaceIndex {
		return x.inNamespace(indexedValue), nil
	}
	items, err := x.Indexer.ByIndex(x.parentIndex(indexName), indexedValue)
	return x.filter(items), err
}

// GetIndexers implements cache.Indexer.
func (x *viewIndexer) GetIndexers() cache.Indexers {
	if x.indexers != nil {
		return x.indexers
	}
	return x.Indexer.GetIndexers()
}

// count returns how many of the parent's objects are the view's.
func (x *viewIndexer) count() int { return len(x.ListKeys()) }

// Add implements cache.Store; a view cannot be written.
func (x *viewIndexer) Add(any) error { return errViewWrite }

// Update implements cache.Store; a view cannot be written.
func (x *viewIndexer) Update(any) error { return errViewWrite }

// Delete implements cache.Store; a view cannot be written.
func (x *viewIndexer) Delete(any) error { return errViewWrite }

// Replace implements cache.Store; a view cannot be written.
func (x *viewIndexer) Replace([]any, string) error { return errViewWrite }

// Resync implements cache.Store; a view has nothing to resync.
func (x *viewIndexer) Resync() error { return nil }

// Bookmark implements cache.Store; a view cannot be written.
func (x *viewIndexer) Bookmark(string) {}

// viewInformer is the parent's informer, seen through the view: handlers
// get the events a watch of the view's own spec would send, indexers are
// the filtered ones, and it is never run, configured or stopped.
type viewInformer struct {
	cache.SharedIndexInformer // the parent's
	view                      *view

	// regs are the handlers added through the view, which leave the
	// parent's informer when the view closes (closed).
	mu     sync.Mutex
	regs   map[cache.ResourceEventHandlerRegistration]struct{}
	closed bool
}

var _ cache.SharedIndexInformer = (*viewInformer)(nil)

// AddEventHandler implements cache.SharedInformer.
func (i *viewInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, cache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod implements cache.SharedInformer.
func (i *viewInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, cache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions implements cache.SharedInformer.
func (i *viewInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return nil, fmt.Errorf("fxstore: store %s was dropped; ask for it again", i.view.key)
	}
	reg, err := i.SharedIndexInformer.AddEventHandlerWithOptions(i.handler(h), o)
	if err == nil {
		i.regs[reg] = struct{}{}
	}
	return reg, err
}

// RemoveEventHandler implements cache.SharedInformer.
func (i *viewInformer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, ok := i.regs[reg]; !ok {
		return nil // removed when the view closed, or never its
	}
	delete(i.regs, reg)
	return i.SharedIndexInformer.RemoveEventHandler(reg)
}

func (i *viewInformer) handler(h cache.ResourceEventHandler) viewHandler {
	return viewHandler{ResourceEventHandler: h, match: i.view.matches, project: i.view.project}
}

// GetStore implements cache.SharedInformer.
func (i *viewInformer) GetStore() cache.Store { return i.view.indexer }

// GetIndexer implements cache.SharedIndexInformer.
func (i *viewInformer) GetIndexer() cache.Indexer { return i.view.indexer }

// Run implements cache.SharedInformer: the parent runs, so it only waits.
func (i *viewInformer) Run(stop <-chan struct{}) { <-stop }

// RunWithContext implements cache.SharedInformer: the parent runs, so it
// only waits.
func (i *viewInformer) RunWithContext(ctx context.Context) { <-ctx.Done() }

// SetTransform implements cache.SharedInformer: a view's objects are its
// parent's, transformed already.
func (i *viewInformer) SetTransform(cache.TransformFunc) error {
	return fmt.Errorf("fxstore: this store is a view of %s; it takes its transform", i.view.parent.key)
}

// SetWatchErrorHandler implements cache.SharedInformer: a view has no watch.
func (i *viewInformer) SetWatchErrorHandler(cache.WatchErrorHandler) error {
	return fmt.Errorf("fxstore: this store is a view of %s; it has no watch of its own", i.view.parent.key)
}

// SetWatchErrorHandlerWithContext implements cache.SharedInformer: a view
// has no watch.
func (i *viewInformer) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return i.SetWatchErrorHandler(nil)
}

// viewHandler passes on the events of the view's objects as a watch of the
// view's spec sends them: an update that makes an object match is an Add,
// one that makes it stop matching is a Delete of the last matching object.
type viewHandler struct {
	cache.ResourceEventHandler
	match   func(any) bool
	project *metadataProjection
}

// OnAdd implements cache.ResourceEventHandler.
func (h viewHandler) OnAdd(obj any, isInInitialList bool) {
	if h.match(obj) {
		h.ResourceEventHandler.OnAdd(h.project.one(obj), isInInitialList)
	}
}

// OnUpdate implements cache.ResourceEventHandler.
func (h viewHandler) OnUpdate(oldObj, newObj any) {
	switch was, is := h.match(oldObj), h.match(newObj); {
	case was && is:
		h.ResourceEventHandler.OnUpdate(h.project.one(oldObj), h.project.one(newObj))
	case is:
		h.ResourceEventHandler.OnAdd(h.project.one(newObj), false)
	case was:
		h.ResourceEventHandler.OnDelete(h.project.one(oldObj))
	}
}

// OnDelete implements cache.ResourceEventHandler. A tombstone is passed on
// when the object it holds matched.
func (h viewHandler) OnDelete(obj any) {
	if h.match(obj) {
		h.ResourceEventHandler.OnDelete(h.project.one(obj))
	}
}

// metadataProjection makes a metadata-only view's objects from its typed
// parent's on each read and event: a PartialObjectMetadata whose metadata
// is the typed object's, its maps and slices shared, as read-only as the
// object itself. The view holds no copy; each read makes one object (one
// allocation for a whole List). A nil projection passes objects as they are.
type metadataProjection struct {
	typeMeta metav1.TypeMeta
}

func newMetadataProjection(gvk schema.GroupVersionKind) *metadataProjection {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return &metadataProjection{typeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}}
}

// hasObjectMeta reports whether the metadata of obj's type can be
// projected: it embeds metav1.ObjectMeta, as every built-in and generated
// type does.
func hasObjectMeta(obj any) bool { return objectMeta(obj) != nil }

func objectMeta(obj any) *metav1.ObjectMeta {
	if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		m, _ := a.GetObjectMeta().(*metav1.ObjectMeta)
		return m
	}
	return nil
}

// one returns obj's projection; a tombstone holds its object's.
func (p *metadataProjection) one(obj any) any {
	if p == nil {
		return obj
	}
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		return o
	case cache.DeletedFinalStateUnknown:
		o.Obj = p.one(o.Obj)
		return o
	}
	if m := objectMeta(obj); m != nil {
		return &metav1.PartialObjectMetadata{TypeMeta: p.typeMeta, ObjectMeta: *m}
	}
	return obj
}

// all replaces items, objects of the parent, by their projections, made in
// one allocation.
func (p *metadataProjection) all(items []any) []any {
	if p == nil || len(items) == 0 {
		return items
	}
	made := make([]metav1.PartialObjectMetadata, len(items))
	for i, item := range items {
		if m := objectMeta(item); m != nil {
			made[i] = metav1.PartialObjectMetadata{TypeMeta: p.typeMeta, ObjectMeta: *m}
			items[i] = &made[i]
		}
	}
	return items
}

// indexFunc returns fn taking the parent's objects: their projections.
func (p *metadataProjection) indexFunc(fn cache.IndexFunc) cache.IndexFunc {
	if p == nil {
		return fn
	}
	return func(obj any) ([]string, error) { return fn(p.one(obj)) }
}

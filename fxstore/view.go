package fxstore

import (
	"fmt"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/internal/informers"
)

// view is a store served from the informer of a broader one (its
// parent), filtered: no informer, no watch and no copy of its own. Its
// indexes are on its parent's informer: under their own names where the
// parent has the same index already, else under names of the view's (see
// parentIndexName).
type view struct {
	*informers.Filtered
	indexerReader
	e, parent *entry
	project   *metadataProjection // nil unless the view is metadata-only
	// names maps the view's index names to its parent's; guarded by the
	// registry's lock. Filtered holds a copy for reads.
	names map[string]string
}

var _ backing = (*view)(nil)

func (v *view) informer() cache.SharedIndexInformer { return v.Filtered }

// add declares the request's indexes on the parent. The options that
// choose a backing fail: the store is a view already.
func (v *view) add(req request, indexes []index) error {
	why := fmt.Sprintf(" as a view of %s", v.parent.key)
	switch {
	case req.ownInformer:
		return lateOption(WithOwnInformer(), why)
	case req.unshared:
		return lateOption(WithoutSharing(), why)
	case req.asBytes:
		return lateOption(HeldAsBytes(), why)
	}
	return v.addIndexes(indexes)
}

// addIndexes declares indexes of the view on its parent's informer. The
// registry's lock is held.
func (v *view) addIndexes(indexes []index) error {
	names := maps.Clone(v.names)
	for _, ix := range indexes {
		names[ix.name] = v.parentIndexName(ix)
	}
	if err := v.parent.addInformerIndexes(names, indexes, v.project.indexFunc); err != nil {
		return err
	}
	own := cache.Indexers{}
	for name, ix := range v.e.indexes {
		own[name] = ix.fn
	}
	for _, ix := range indexes {
		own[ix.name] = ix.fn
	}
	v.names = names
	v.SetIndexes(names, own)
	return nil
}

// parentIndexName is the name the view's index ix takes on its parent's
// informer: its own where the parent has an index of that name and
// function, which the view shares. Otherwise it is named by its name and
// function, so that views with the same index share it, and none meets
// an index of the parent's of the same name. A metadata-only view's index
// functions take its objects, not the parent's: they are wrapped, under
// names of their own.
func (v *view) parentIndexName(ix index) string {
	if v.project == nil {
		if id, ok := v.parent.onInformer[ix.name]; ok && id == ix.fnID {
			return ix.name
		}
		return fmt.Sprintf("fxstore view index %q by %s", ix.name, ix.fnID)
	}
	return fmt.Sprintf("fxstore metadata view index %q by %s", ix.name, ix.fnID)
}

// health is the parent's, whose list and watch feed the view.
func (v *view) health() (time.Time, error) { return v.parent.ownHealth() }

func (v *view) resource() schema.GroupResource { return v.parent.boundResource }

// describe names the parent and, while the view has not synced, why the
// parent has not.
func (v *view) describe(info *StoreInfo) {
	info.ViewOf = &v.parent.key
	if info.Status.Synced {
		return
	}
	v.parent.mu.Lock()
	defer v.parent.mu.Unlock()
	if err := v.parent.reportedErrLocked(); err != nil {
		info.Status.LastError = fmt.Errorf("its store %s: %w", v.parent.key, err)
	}
}

func (v *view) close() { v.Filtered.Close() }

func (*view) heapBytes(int) int64 { return 0 }

// newView returns the view e of parent whose objects are those sel selects
// of parent's, made by project, with no index yet. Unless sel selects by
// namespace only, it adds to parent's informer an index of the view's
// objects by namespace (and all of them under informers.AllNamespaces),
// so that listing the view reads its objects only: an index holds keys,
// not objects. A view by namespace only lists from parent's own namespace
// index. The registry's lock is held.
func newView(parent, e *entry, sel viewSelection, project *metadataProjection) (*view, error) {
	match := sel.matcher()
	f := informers.Filter{
		Name:   e.key.String(),
		Parent: parent.key.String(),
		Match:  func(obj any) bool { o, ok := obj.(client.Object); return ok && match(o) },
	}
	if project != nil {
		f.Project = project
	}
	if sel.namespaceOnly() {
		f.Namespace = sel.namespace
	} else if f.ListIndex = "fxstore view " + e.key.String(); parent.informer.GetIndexer().GetIndexers()[f.ListIndex] == nil {
		// A view of the same key before it (a shard given up and taken
		// again) left its index, of the same function: it is kept.
		// client-go cannot remove an index: for a shard, that is at most
		// one index per bucket the process ever held.
		err := parent.informer.AddIndexers(cache.Indexers{f.ListIndex: func(obj any) ([]string, error) {
			o, ok := obj.(client.Object)
			if !ok || !match(o) {
				return nil, nil
			}
			return []string{o.GetNamespace(), informers.AllNamespaces}, nil
		}})
		if err != nil {
			return nil, err
		}
	}
	filtered := informers.NewFiltered(parent.informer, f)
	v := &view{Filtered: filtered, indexerReader: indexerReader{filtered.GetIndexer()}, e: e, parent: parent, project: project, names: map[string]string{}}
	v.SetIndexes(v.names, cache.Indexers{})
	return v, nil
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

// One returns obj's projection; a tombstone holds its object's.
func (p *metadataProjection) One(obj any) any {
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		return o
	case cache.DeletedFinalStateUnknown:
		o.Obj = p.One(o.Obj)
		return o
	}
	if m := objectMeta(obj); m != nil {
		return &metav1.PartialObjectMetadata{TypeMeta: p.typeMeta, ObjectMeta: *m}
	}
	return obj
}

// All replaces items, objects of the parent, by their projections, made
// in one allocation.
func (p *metadataProjection) All(items []any) []any {
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
	return func(obj any) ([]string, error) { return fn(p.One(obj)) }
}

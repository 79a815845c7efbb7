package fxstore

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/internal/informers"
)

// view is a store served from the informer of a broader one (its
// parent), filtered: no informer, no watch and no copy of its own.
type view struct {
	*informers.Filtered
	parent *entry
}

var _ backing = (*view)(nil)

func (v *view) source() *entry { return v.parent }
func (v *view) close()         { v.Filtered.Close() }

func (*view) heapBytes(int) int64 { return 0 }

// newView returns the view of parent whose objects are those sel selects
// of parent's (key's objects), made by project, with its indexes by the
// names indexNames gives them on parent; indexers are its own index
// functions when project is set. Unless sel selects by namespace only, it
// adds to parent's informer an index of the view's objects by namespace
// (and all of them under informers.AllNamespaces), so that listing the
// view reads its objects only: an index holds keys, not objects. A view by
// namespace only lists from parent's own namespace index.
func newView(parent *entry, key Key, sel viewSelection, project *metadataProjection, indexNames map[string]string, indexers cache.Indexers) (*view, error) {
	match := sel.matcher()
	f := informers.Filter{
		Name:       key.String(),
		Parent:     parent.key.String(),
		Match:      func(obj any) bool { o, ok := obj.(client.Object); return ok && match(o) },
		IndexNames: indexNames,
	}
	if project != nil {
		f.Project, f.Indexers = project, indexers
	}
	if sel.namespaceOnly() {
		f.Namespace = sel.namespace
	} else if f.ListIndex = "fxstore view " + key.String(); parent.informer.GetIndexer().GetIndexers()[f.ListIndex] == nil {
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
	return &view{Filtered: informers.NewFiltered(parent.informer, f), parent: parent}, nil
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

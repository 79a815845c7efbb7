package fxstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/fxkube/fxkube/internal/kinds"
	"github.com/fxkube/fxkube/internal/selectors"
)

// Spec is what a module asks for: which objects a store holds. Every request
// for an equivalent Spec and the same object type gets the same store.
type Spec struct {
	// Kind is the group, version and kind of the objects. It is required for
	// unstructured and metadata-only stores; for typed stores it defaults to
	// the kind registered for the Go type in the scheme and, when set, must
	// agree with it.
	Kind schema.GroupVersionKind

	// Namespace restricts the store to one namespace. Defaults to all
	// namespaces.
	Namespace string

	// LabelSelector restricts the store to objects whose labels match, in
	// kubectl's syntax ("app=web,tier in (a,b)"). Defaults to everything.
	LabelSelector string

	// FieldSelector restricts the store to objects whose fields match, in
	// kubectl's syntax ("metadata.name=x"). The API server decides which
	// fields a kind supports. Defaults to everything.
	FieldSelector string

	// Transform is applied to each object before it is stored. Defaults to
	// StripManagedFields.
	Transform Transform

	// Shard restricts the store to one shard of the objects: those whose
	// shard key (ShardByUID or ShardByNamespace) hashes into the
	// selector's ranges (KEP-5866, sharding.NewSelector). The API server
	// filters when its ShardedListAndWatch feature gate is on. When it does
	// not, and Registry.CheckShardSelectors has found so, a sharded store
	// asked for afterwards is a view of the store of its whole spec, or of
	// the broader store that one is a view of (one list and watch of every
	// object for all the shards); otherwise the
	// store filters on the client, logs it once and reports it in
	// fxkube_store_shard_filtered_on_client_total: it holds the same
	// objects, but receives all of them. Else a sharded store is never
	// served from a broader store, and never serves one. Defaults to every
	// object.
	Shard sharding.Selector
}

// Transform is a named function applied to every object before a store keeps
// it, to drop what no consumer reads. The name is part of the store's Key;
// two requests using the same name must use the same function.
type Transform struct {
	Name string
	Func cache.TransformFunc
}

var (
	// StripManagedFields drops metadata.managedFields, which few controllers
	// read and which often is the largest part of an object. It is the
	// default.
	StripManagedFields = Transform{Name: "strip-managed-fields", Func: crcache.TransformStripManagedFields()}

	// KeepEverything stores objects exactly as the API server sent them.
	KeepEverything = Transform{Name: "none"}
)

// Projection is how a store represents its objects in memory.
type Projection uint8

const (
	// Typed stores hold the Go type registered in the scheme.
	Typed Projection = iota
	// Unstructured stores hold *unstructured.Unstructured.
	Unstructured
	// Metadata stores hold only metadata, as *metav1.PartialObjectMetadata.
	Metadata
)

func (p Projection) String() string {
	switch p {
	case Typed:
		return "typed"
	case Unstructured:
		return "unstructured"
	case Metadata:
		return "metadata-only"
	}
	return "Projection(" + strconv.Itoa(int(p)) + ")"
}

// Key identifies a store: a canonical watch spec. Equivalent specs have equal
// keys, so a Key can be used as a map key.
type Key struct {
	// Cluster is the cluster of the store's registry (see WithCluster):
	// empty in the app's own cluster.
	Cluster       string
	Kind          schema.GroupVersionKind
	Namespace     string
	LabelSelector string // canonical form
	FieldSelector string // canonical form
	Projection    Projection
	Transform     string
	Shard         string // the shard selector's wire form
}

// String describes the store the way error messages and metrics name it, for
// example `Deployment.apps/v1 (namespace "web", labels "app=x")`.
func (k Key) String() string {
	var b strings.Builder
	b.WriteString(kinds.Name(k.Kind))
	b.WriteString(" (")
	if k.Cluster != "" {
		fmt.Fprintf(&b, "cluster %q, ", k.Cluster)
	}
	if k.Namespace == "" {
		b.WriteString("all namespaces")
	} else {
		fmt.Fprintf(&b, "namespace %q", k.Namespace)
	}
	if k.LabelSelector != "" {
		fmt.Fprintf(&b, ", labels %q", k.LabelSelector)
	}
	if k.FieldSelector != "" {
		fmt.Fprintf(&b, ", fields %q", k.FieldSelector)
	}
	if k.Projection != Typed {
		b.WriteString(", ")
		b.WriteString(k.Projection.String())
	}
	if k.Transform != StripManagedFields.Name {
		fmt.Fprintf(&b, ", transform %q", k.Transform)
	}
	if k.Shard != "" {
		fmt.Fprintf(&b, ", shard %q", k.Shard)
	}
	b.WriteString(")")
	return b.String()
}

// key canonicalises the spec for objects of the given kind and projection,
// its selectors through c.
func (s Spec) key(gvk schema.GroupVersionKind, p Projection, c *selectors.Memo) (Key, error) {
	k := Key{Kind: gvk, Namespace: s.Namespace, Projection: p, Transform: s.transform().Name}
	var errs []error
	if gvk.Kind == "" || gvk.Version == "" {
		errs = append(errs, errors.New("kind and version are required; set Spec.Kind"))
	}
	if s.Namespace != "" {
		if msgs := validation.IsDNS1123Label(s.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("invalid namespace %q: %s", s.Namespace, strings.Join(msgs, "; ")))
		}
	}
	// On error the key keeps the selector as written, to name it in the
	// message.
	var err error
	if k.LabelSelector, err = c.Labels(s.LabelSelector); err != nil {
		k.LabelSelector = s.LabelSelector
		errs = append(errs, err)
	}
	if k.FieldSelector, err = c.Fields(s.FieldSelector); err != nil {
		k.FieldSelector = s.FieldSelector
		errs = append(errs, err)
	}
	if k.Shard, err = selectors.Shard(s.Shard); err != nil {
		errs = append(errs, err)
	}
	if s.Transform.Name == "" && s.Transform.Func != nil {
		errs = append(errs, errors.New("transform has a function but no name; name it so equal specs can share a store"))
	}
	return k, errors.Join(errs...)
}

func (s Spec) transform() Transform {
	if s.Transform.Name == "" {
		return StripManagedFields
	}
	return s.Transform
}

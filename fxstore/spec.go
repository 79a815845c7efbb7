package fxstore

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
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
	b.WriteString(kindString(k.Kind))
	b.WriteString(" (")
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

// kindString names a kind as Kind.group/version ("Deployment.apps/v1",
// "ConfigMap/v1" for the core group).
func kindString(gvk schema.GroupVersionKind) string {
	kind := gvk.Kind
	if kind == "" {
		kind = "<no kind>"
	}
	if gvk.Group == "" {
		return kind + "/" + gvk.Version
	}
	return kind + "." + gvk.Group + "/" + gvk.Version
}

// key canonicalises the spec for objects of the given kind and projection,
// its selectors through c.
func (s Spec) key(gvk schema.GroupVersionKind, p Projection, c *canonicalSelectors) (Key, error) {
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
	if k.LabelSelector, err = c.labels(s.LabelSelector); err != nil {
		k.LabelSelector = s.LabelSelector
		errs = append(errs, err)
	}
	if k.FieldSelector, err = c.fields(s.FieldSelector); err != nil {
		k.FieldSelector = s.FieldSelector
		errs = append(errs, err)
	}
	if k.Shard, err = canonicalShardSelector(s.Shard); err != nil {
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

// canonicalSelectors memoises canonicalLabelSelector and
// canonicalFieldSelector by the selector as written: an app's modules ask
// for a few specs many times over, and parsing a label selector checks
// every key and value with regular expressions. Errors are kept as well, so
// a bad selector fails alike each time. It holds one entry per distinct
// selector asked for. The zero value is ready to use.
type canonicalSelectors struct {
	byLabels, byFields sync.Map // selector as written → canonicalForm
}

// canonicalForm is what canonicalising a selector returned.
type canonicalForm struct {
	selector string
	err      error
}

func (c *canonicalSelectors) labels(s string) (string, error) {
	return canonicalOnce(&c.byLabels, s, canonicalLabelSelector)
}

func (c *canonicalSelectors) fields(s string) (string, error) {
	return canonicalOnce(&c.byFields, s, canonicalFieldSelector)
}

func canonicalOnce(memo *sync.Map, s string, canonical func(string) (string, error)) (string, error) {
	if f, ok := memo.Load(s); ok {
		f := f.(canonicalForm)
		return f.selector, f.err
	}
	selector, err := canonical(s)
	memo.Store(s, canonicalForm{selector, err})
	return selector, err
}

// canonicalLabelSelector parses a label selector and returns its canonical
// form: requirements sorted and deduplicated, "==" written "=", and one-value
// "in"/"notin" written "="/"!=". Equivalent selectors have equal canonical
// forms, and canonicalising a canonical form changes nothing.
func canonicalLabelSelector(s string) (string, error) {
	if err := checkControlChars(s); err != nil {
		return "", fmt.Errorf("invalid label selector %q: %w", s, err)
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return "", fmt.Errorf("invalid label selector %q: %w", s, err)
	}
	reqs, _ := sel.Requirements()
	terms := make([]string, 0, len(reqs))
	for _, r := range reqs {
		op, vals := r.Operator(), r.Values().UnsortedList()
		switch {
		case op == selection.DoubleEquals, op == selection.In && len(vals) == 1:
			op = selection.Equals
		case op == selection.NotIn && len(vals) == 1:
			op = selection.NotEquals
		}
		nr, err := labels.NewRequirement(r.Key(), op, vals)
		if err != nil {
			return "", fmt.Errorf("invalid label selector %q: %w", s, err)
		}
		terms = append(terms, nr.String())
	}
	slices.Sort(terms)
	return strings.Join(slices.Compact(terms), ","), nil
}

// canonicalFieldSelector parses a field selector and returns its canonical
// form: terms sorted and deduplicated and "==" written "=".
func canonicalFieldSelector(s string) (string, error) {
	if err := checkControlChars(s); err != nil {
		return "", fmt.Errorf("invalid field selector %q: %w", s, err)
	}
	sel, err := fields.ParseSelector(s)
	if err != nil {
		return "", fmt.Errorf("invalid field selector %q: %w", s, err)
	}
	reqs := sel.Requirements()
	terms := make([]string, 0, len(reqs))
	for _, r := range reqs {
		field := strings.TrimSpace(r.Field)
		if !validField(field) {
			return "", fmt.Errorf("invalid field selector %q: field %q is not a field path such as metadata.name", s, field)
		}
		if r.Operator == selection.NotEquals {
			terms = append(terms, fields.OneTermNotEqualSelector(field, r.Value).String())
		} else {
			terms = append(terms, fields.OneTermEqualSelector(field, r.Value).String())
		}
	}
	slices.Sort(terms)
	return strings.Join(slices.Compact(terms), ","), nil
}

// checkControlChars rejects control characters other than whitespace, which
// apimachinery's label parser takes for the end of input: "a=1,\x00b=2" would
// silently select everything.
func checkControlChars(s string) error {
	for i, r := range s {
		if r < 0x20 && r != ' ' && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return fmt.Errorf("control character %q at byte %d", r, i)
		}
	}
	return nil
}

// validField reports whether f looks like a field path the API server
// accepts, such as "metadata.name" or "spec.nodeName".
func validField(f string) bool {
	if f == "" {
		return false
	}
	for _, r := range f {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '.', r == '_', r == '-', r == '/':
		default:
			return false
		}
	}
	return true
}

package fxstore

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
	"unique"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/tools/cache"

	"github.com/fxkube/fxkube/internal/informers"
	"github.com/fxkube/fxkube/internal/share"
)

// held is an object as a store held as bytes keeps it: its encoding, the
// metadata its informer's keys and namespace index need, and its labels,
// so that a List selects before it decodes. A protobuf encoding shares
// the fields other objects repeat.
type held struct {
	metav1.ObjectMeta
	gvk    schema.GroupVersionKind
	wire   share.Wire // protobuf if the codec's proto is set, else JSON
	labels labelSet
}

// labelSet is an object's labels, held once per process for every object
// with the same: "key\x00value\x00" for each label, sorted by key. It
// implements labels.Labels without a map.
type labelSet struct{ h unique.Handle[string] }

var _ labels.Labels = labelSet{}

func newLabelSet(set map[string]string) labelSet {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(set)) {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(set[k])
		b.WriteByte(0)
	}
	return labelSet{unique.Make(b.String())}
}

// Lookup implements labels.Labels.
func (l labelSet) Lookup(key string) (string, bool) {
	for s := l.h.Value(); s != ""; {
		k, rest, _ := strings.Cut(s, "\x00")
		v, rest, _ := strings.Cut(rest, "\x00")
		if k == key {
			return v, true
		}
		s = rest
	}
	return "", false
}

// Has implements labels.Labels.
func (l labelSet) Has(key string) bool {
	_, ok := l.Lookup(key)
	return ok
}

// Get implements labels.Labels.
func (l labelSet) Get(key string) string {
	v, _ := l.Lookup(key)
	return v
}

// wireCodec encodes the objects of a store held as bytes: protobuf where
// the type has it (every built-in kind), JSON otherwise, as client-go's
// JSON serializer does.
type wireCodec struct {
	typ reflect.Type // the objects' struct type
	// proto is set for a Kubernetes type with generated protobuf code.
	proto bool
	// split shares the fields protobuf encodings repeat.
	split *share.WireSplitter
	// check decodes each object's JSON as it is taken, to see that it
	// gives the object back (see jsonMayChange).
	check bool
}

// protoMessage is a type with generated protobuf code, as every
// built-in kind has: what it marshals unmarshals back to the same object.
type protoMessage interface {
	k8sruntime.ProtobufReverseMarshaller
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// newWireCodec returns the codec of a store of example's type. Protobuf is
// used only for Kubernetes' own types: another type may have promoted the
// methods of a type it embeds, and encode that part alone.
func newWireCodec(example k8sruntime.Object) *wireCodec {
	typ := reflect.TypeOf(example).Elem()
	_, proto := example.(protoMessage)
	c := &wireCodec{typ: typ, proto: proto && kubernetes(typ)}
	if c.proto {
		c.split = share.NewWireSplitter()
	} else {
		c.check = jsonMayChange(typ)
	}
	return c
}

// kubernetes reports whether t is declared in one of Kubernetes' packages.
func kubernetes(t reflect.Type) bool { return strings.HasPrefix(t.PkgPath(), "k8s.io/") }

// jsonMayChange reports whether JSON may not give back a value of type t
// as it was: t holds a type with JSON methods of its own from outside
// Kubernetes' packages, an interface, or a field JSON leaves out.
// Kubernetes' own types give back what the API server sent.
func jsonMayChange(t reflect.Type) bool { return mayChange(t, make(map[reflect.Type]bool)) }

func mayChange(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch {
	case t.Kind() == reflect.Pointer:
		return mayChange(t.Elem(), seen)
	case ownJSON(t):
		return !kubernetes(t)
	}
	switch t.Kind() {
	case reflect.Interface:
		// JSON gives back maps, slices, strings, numbers and booleans
		// only.
		return true
	case reflect.Slice, reflect.Array:
		return mayChange(t.Elem(), seen)
	case reflect.Map:
		return mayChange(t.Key(), seen) || mayChange(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if leftOut(f) {
				if !kubernetes(t) {
					return true
				}
				continue
			}
			if mayChange(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// leftOut reports whether JSON leaves out field f: an unexported field,
// except an embedded struct whose fields JSON takes, or one tagged "-".
func leftOut(f reflect.StructField) bool {
	if f.Tag.Get("json") == "-" {
		return true
	}
	if f.IsExported() {
		return false
	}
	t := f.Type
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return !f.Anonymous || t.Kind() != reflect.Struct
}

// jsonMethods are the interfaces through which a type encodes itself.
var jsonMethods = []reflect.Type{
	reflect.TypeFor[json.Marshaler](), reflect.TypeFor[json.Unmarshaler](),
	reflect.TypeFor[encoding.TextMarshaler](), reflect.TypeFor[encoding.TextUnmarshaler](),
}

// ownJSON reports whether t, or a pointer to it, encodes itself.
func ownJSON(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	for _, m := range jsonMethods {
		if t.Implements(m) || p.Implements(m) {
			return true
		}
	}
	return false
}

// encode returns obj held as bytes, sharing what old, the object it
// replaces, holds. It fails if the encoding would not decode back to
// obj: the caller then keeps obj as it is.
func (c *wireCodec) encode(obj, old any) (any, error) {
	o, ok := obj.(interface {
		metav1.Object
		k8sruntime.Object
	})
	if !ok || reflect.TypeOf(obj) != reflect.PointerTo(c.typ) {
		// A tombstone, or an object of another type a transform made:
		// it would not decode as the store's type.
		return obj, nil
	}
	h := &held{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName(), ResourceVersion: o.GetResourceVersion()},
		gvk:        o.GetObjectKind().GroupVersionKind(),
		labels:     newLabelSet(o.GetLabels()),
	}
	var (
		raw []byte
		err error
	)
	if c.proto {
		raw, err = obj.(protoMessage).Marshal()
	} else {
		raw, err = c.encodeJSON(obj)
	}
	if err != nil {
		return nil, fmt.Errorf("hold %s/%s as bytes: %w", o.GetNamespace(), o.GetName(), err)
	}
	if c.proto {
		var replaced *share.Wire
		if o, ok := old.(*held); ok {
			replaced = &o.wire
		}
		h.wire = c.split.Split(raw, replaced)
	} else {
		h.wire = share.Whole(raw)
	}
	return h, nil
}

// encodeJSON returns obj as JSON, checked to decode back to obj if its
// type may not: a type's own MarshalJSON and UnmarshalJSON may disagree,
// and a transform may set fields that JSON leaves out.
func (c *wireCodec) encodeJSON(obj any) ([]byte, error) {
	raw, err := utiljson.Marshal(obj)
	if err != nil || !c.check {
		return raw, err
	}
	back := reflect.New(c.typ).Interface()
	if err := utiljson.Unmarshal(raw, back); err != nil {
		return nil, fmt.Errorf("its JSON does not decode: %w", err)
	}
	if !equality.Semantic.DeepEqual(obj, back) {
		return nil, errors.New("its JSON decodes to a different object")
	}
	return raw, nil
}

// decode returns an object as a read of the store gives it: the caller's
// own. An object held as bytes is decoded, one kept decoded copied.
func (c *wireCodec) decode(obj any) any {
	switch o := obj.(type) {
	case *held:
		return c.object(o)
	case cache.DeletedFinalStateUnknown:
		o.Obj = c.decode(o.Obj)
		return o
	case k8sruntime.Object:
		return o.DeepCopyObject()
	}
	return obj
}

// object returns the object h holds, made anew.
func (c *wireCodec) object(h *held) any {
	out := reflect.New(c.typ).Interface()
	raw := h.wire.AppendTo(make([]byte, 0, h.wire.Len()))
	var err error
	if c.proto {
		err = out.(protoMessage).Unmarshal(raw)
	} else {
		err = utiljson.Unmarshal(raw, out)
	}
	if err != nil {
		// Generated protobuf and Kubernetes' JSON types decode what they
		// encode; encode checked any other type's.
		panic(fmt.Sprintf("fxstore: decode %s/%s held as bytes: %v", h.Namespace, h.Name, err))
	}
	if !h.gvk.Empty() {
		out.(k8sruntime.Object).GetObjectKind().SetGroupVersionKind(h.gvk)
	}
	return out
}

// One implements informers.Projection.
func (c *wireCodec) One(obj any) any { return c.decode(obj) }

// All implements informers.Projection.
func (c *wireCodec) All(items []any) []any {
	for i, item := range items {
		items[i] = c.decode(item)
	}
	return items
}

// heldAsBytes backs a store whose own informer holds its objects as bytes:
// reads and handlers get them decoded, each time.
type heldAsBytes struct {
	*informers.Filtered
	indexerReader // of the decoded objects
	e             *entry
	raw           cache.Indexer // the informer's, of encodings
}

var _ backing = (*heldAsBytes)(nil)

func newHeldAsBytes(e *entry) *heldAsBytes {
	decoded := informers.NewFiltered(e.informer, informers.Filter{
		Name:    e.key.String(),
		Parent:  e.key.String() + " (as bytes)",
		Match:   func(any) bool { return true },
		Project: e.codec,
	})
	return &heldAsBytes{Filtered: decoded, indexerReader: indexerReader{decoded.GetIndexer()}, e: e, raw: e.informer.GetIndexer()}
}

func (b *heldAsBytes) informer() cache.SharedIndexInformer { return b.Filtered }

// add is an informer of its own's: its indexes decode what they index.
func (b *heldAsBytes) add(req request, indexes []index) error {
	return (&ownInformer{e: b.e}).add(req, indexes)
}

// list returns the objects in namespace, or in all when it is "", that
// sel selects. It decodes those only.
func (b *heldAsBytes) list(namespace string, sel labels.Selector) ([]any, error) {
	items, err := indexerReader{b.raw}.list(namespace, nil)
	if err != nil {
		return nil, err
	}
	// The indexer returns a slice of the caller's own.
	out := items[:0]
	for _, item := range items {
		if h, ok := item.(*held); ok && sel != nil && !sel.Matches(h.labels) {
			continue
		}
		out = append(out, b.e.codec.decode(item))
	}
	return out, nil
}

func (b *heldAsBytes) health() (time.Time, error) { return b.e.ownHealth() }

func (b *heldAsBytes) resource() schema.GroupResource { return b.e.boundResource }

func (*heldAsBytes) describe(*StoreInfo) {}

func (b *heldAsBytes) close() { b.Filtered.Close() }

// heapBytes sums the encodings and what holds them, each shared field
// once, and sizes the objects kept decoded.
func (b *heldAsBytes) heapBytes(int) int64 {
	var n int64
	fields := make(map[unique.Handle[string]]struct{})
	for _, obj := range b.raw.List() {
		h, ok := obj.(*held)
		if !ok {
			n += share.Size(obj)
			continue
		}
		n += int64(reflect.TypeFor[held]().Size()) + h.wire.InlineBytes() + int64(len(h.Namespace)+len(h.Name)+len(h.ResourceVersion))
		for f := range h.wire.Shared() {
			if _, ok := fields[f]; !ok {
				fields[f] = struct{}{}
				n += share.WireFieldBytes(f)
			}
		}
	}
	return n
}

// indexFunc returns fn taking the store's objects decoded, if it holds
// them as bytes.
func (e *entry) indexFunc(fn cache.IndexFunc) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		if h, ok := obj.(*held); ok {
			// Only a store held as bytes, with a codec, holds one.
			obj = e.codec.object(h)
		}
		return fn(obj)
	}
}

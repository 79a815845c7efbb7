package fxstore

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/fxkube/fxkube/internal/informers"
)

// held is an object as a store held as bytes keeps it: its encoding, the
// metadata its informer's keys and namespace index need, and its labels,
// so that a List selects before it decodes.
type held struct {
	metav1.ObjectMeta
	gvk    schema.GroupVersionKind
	raw    []byte
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

// wireCodec encodes a store's objects for HeldAsBytes: protobuf where the
// type has it (every built-in kind), JSON otherwise.
type wireCodec struct {
	typ reflect.Type // the objects' struct type
}

type protoMessage interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

func newWireCodec(example k8sruntime.Object) wireCodec {
	return wireCodec{typ: reflect.TypeOf(example).Elem()}
}

// encode returns obj held as bytes.
func (c wireCodec) encode(obj any) (any, error) {
	o, ok := obj.(interface {
		metav1.Object
		k8sruntime.Object
	})
	if !ok {
		return obj, nil // a tombstone or what a transform made: kept as it is
	}
	var (
		raw []byte
		err error
	)
	if m, ok := obj.(protoMessage); ok {
		raw, err = m.Marshal()
	} else {
		raw, err = json.Marshal(obj)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %s/%s to hold it as bytes: %w", o.GetNamespace(), o.GetName(), err)
	}
	return &held{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName(), ResourceVersion: o.GetResourceVersion()},
		gvk:        o.GetObjectKind().GroupVersionKind(),
		raw:        raw,
		labels:     newLabelSet(o.GetLabels()),
	}, nil
}

// decode returns the object h holds, made anew; anything else as it is.
func (c wireCodec) decode(obj any) any {
	switch h := obj.(type) {
	case *held:
		v := reflect.New(c.typ)
		out := v.Interface()
		var err error
		if m, ok := out.(protoMessage); ok {
			err = m.Unmarshal(h.raw)
		} else {
			err = json.Unmarshal(h.raw, out)
		}
		if err != nil {
			// The bytes are what encode made of a valid object.
			panic(fmt.Sprintf("fxstore: decode %s/%s held as bytes: %v", h.Namespace, h.Name, err))
		}
		if !h.gvk.Empty() {
			out.(k8sruntime.Object).GetObjectKind().SetGroupVersionKind(h.gvk)
		}
		return out
	case cache.DeletedFinalStateUnknown:
		h.Obj = c.decode(h.Obj)
		return h
	}
	return obj
}

// One implements informers.Projection.
func (c wireCodec) One(obj any) any { return c.decode(obj) }

// All implements informers.Projection.
func (c wireCodec) All(items []any) []any {
	for i, item := range items {
		items[i] = c.decode(item)
	}
	return items
}

// heldAsBytes backs a store whose own informer holds its objects as bytes:
// reads and handlers get them decoded, each time.
type heldAsBytes struct {
	*informers.Filtered
	e *entry
}

var _ backing = heldAsBytes{}

func newHeldAsBytes(e *entry) heldAsBytes {
	return heldAsBytes{
		Filtered: informers.NewFiltered(e.informer, informers.Filter{
			Name:    e.key.String(),
			Parent:  e.key.String() + " (as bytes)",
			Match:   func(any) bool { return true },
			Project: e.codec,
		}),
		e: e,
	}
}

func (b heldAsBytes) source() *entry { return b.e }

func (b heldAsBytes) close() { b.Filtered.Close() }

// selected returns the objects in namespace, or in all when it is "",
// that sel selects. It decodes those only.
func (b heldAsBytes) selected(namespace string, sel labels.Selector) ([]any, error) {
	items, err := ownList(b.e.informer.GetIndexer(), namespace)
	if err != nil {
		return nil, err
	}
	// The indexer returns a slice of the caller's own.
	out := items[:0]
	for _, item := range items {
		if h, ok := item.(*held); ok && !sel.Matches(h.labels) {
			continue
		}
		out = append(out, b.e.codec.decode(item))
	}
	return out, nil
}

// heapBytes sums the encodings and what holds them.
func (b heldAsBytes) heapBytes(int) int64 {
	var n int64
	for _, obj := range b.e.informer.GetIndexer().List() {
		if h, ok := obj.(*held); ok {
			n += int64(reflect.TypeFor[held]().Size()) + int64(cap(h.raw)+len(h.Namespace)+len(h.Name)+len(h.ResourceVersion))
		}
	}
	return n
}

// indexFunc returns fn taking the objects as the store holds them.
func (c wireCodec) indexFunc(fn cache.IndexFunc) cache.IndexFunc {
	return func(obj any) ([]string, error) { return fn(c.decode(obj)) }
}

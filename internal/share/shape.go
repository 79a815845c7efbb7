package share

import (
	"encoding/binary"
	"hash/maphash"
	"reflect"
	"sync"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A shape is what a table learns of a type, once: where its parts are,
// and how to hash and compare its values. A table walks a value through
// its shape and a pointer to it, without reflection on the way.
type shape struct {
	typ  reflect.Type
	kind reflect.Kind
	size uintptr
	// flat: two values with canonical parts are equal exactly when their
	// memory is. See flat.
	flat bool
	// plain: a value is scalars without padding: its memory is its value.
	plain bool
	// opaque: a struct with unexported fields, which reflection cannot
	// set. Such values are hashed and compared whole.
	opaque bool
	// unique: a string no other object holds (see uniqueFields). It is
	// hashed and compared by content, and never held by the table.
	unique bool
	// elem is the shape of a pointer's, slice's, array's or map's
	// elements; key that of a map's keys.
	elem, key *shape
	// n is an array's length.
	n int
	// fields are a struct's fields, runs of plain fields merged.
	fields []field
	maps   mapKind
}

// A field is a struct field, or a run of adjacent plain fields (shape
// nil) hashed and compared as memory.
type field struct {
	off, size uintptr
	shape     *shape
}

// mapKind says how a table walks a map.
//
// Maps keyed by strings are walked as Go maps, not through reflection. A
// key of a string type is hashed, compared and laid out as a string is,
// so a map[corev1.ResourceName]V is walked as the map[string]V it is in
// memory.
type mapKind int

const (
	// reflectedMap is walked through reflection.
	reflectedMap mapKind = iota
	// stringMap has keys and values of string types.
	stringMap
	// quantityMap has keys of a string type and resource.Quantity
	// values, as ResourceList has.
	quantityMap
	// rebuiltMap has keys that walking could make unequal to themselves.
	// Owned, it is rebuilt rather than changed in place.
	rebuiltMap
)

// shapes are the shapes learnt, shared by all tables.
var shapes = struct {
	sync.Mutex
	byType map[reflect.Type]*shape
}{byType: map[reflect.Type]*shape{}}

// shapeOf returns typ's shape, learning it the first time.
func (pl *Pool) shapeOf(typ reflect.Type) *shape {
	if info, ok := pl.types[typ]; ok {
		return info.shape
	}
	shapes.Lock()
	s := learn(typ)
	shapes.Unlock()
	pl.types[typ] = typeInfo{s}
	return s
}

// learn returns typ's shape, learning it the first time. The caller
// holds shapes' lock.
func learn(typ reflect.Type) *shape {
	if s, ok := shapes.byType[typ]; ok {
		return s
	}
	s := &shape{typ: typ, kind: typ.Kind(), size: typ.Size(), flat: flat(typ, false)}
	// Held before its elements are learnt: a type may reach itself.
	shapes.byType[typ] = s
	switch s.kind {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		s.plain = true
	case reflect.Pointer, reflect.Slice:
		s.elem = learn(typ.Elem())
	case reflect.Array:
		s.elem, s.n = learn(typ.Elem()), typ.Len()
		s.plain = s.elem.plain
	case reflect.Map:
		s.key, s.elem = learn(typ.Key()), learn(typ.Elem())
		s.maps = kindOfMap(s.key, s.elem)
	case reflect.Struct:
		learnFields(s)
	}
	return s
}

// kindOfMap returns how a table walks maps with keys and values of
// shapes key and elem.
func kindOfMap(key, elem *shape) mapKind {
	switch {
	case key.kind == reflect.String && elem.kind == reflect.String:
		return stringMap
	case key.kind == reflect.String && elem.typ == quantityType:
		return quantityMap
	}
	switch key.kind {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return reflectedMap
	}
	// A canonical pointer is another key; a NaN is never found again.
	return rebuiltMap
}

// learnFields learns the fields of a struct's shape s, and whether it is
// plain.
func learnFields(s *shape) {
	typ := s.typ
	for i := range typ.NumField() {
		if !typ.Field(i).IsExported() {
			s.opaque = true
			return
		}
	}
	s.plain = true
	var end uintptr
	for i := range typ.NumField() {
		f := typ.Field(i)
		fs := learn(f.Type)
		if typ == objectMetaType && uniqueFields[f.Name] {
			fs = &shape{typ: f.Type, kind: reflect.String, size: fs.size, unique: true}
		}
		switch {
		case !fs.plain:
			s.plain = false
			s.fields = append(s.fields, field{off: f.Offset, size: fs.size, shape: fs})
		case fs.size == 0:
		case len(s.fields) > 0 && s.fields[len(s.fields)-1].shape == nil && end == f.Offset:
			s.fields[len(s.fields)-1].size += fs.size
		default:
			s.fields = append(s.fields, field{off: f.Offset, size: fs.size})
		}
		if f.Offset != end {
			s.plain = false // padding
		}
		end = f.Offset + fs.size
	}
	if end != s.size {
		s.plain = false
	}
}

// objectMetaType is the metadata every object has.
var objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()

// uniqueFields are the fields of ObjectMeta whose strings no other object
// of a store holds: its name, UID and resource version. Held, each would
// cost the table an entry and save nothing. A resource version changes
// with every update.
var uniqueFields = map[string]bool{"Name": true, "UID": true, "ResourceVersion": true}

// sliceHeader is how a slice lies in memory.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// at returns the address of element i of a slice or array at p whose
// elements have shape s.
func at(p unsafe.Pointer, s *shape, i int) unsafe.Pointer {
	return unsafe.Add(p, uintptr(i)*s.size)
}

// hashMemory hashes the n bytes at p, whatever their alignment.
func (pl *Pool) hashMemory(p unsafe.Pointer, n uintptr) uint64 {
	b := unsafe.Slice((*byte)(p), n)
	switch n {
	case 1:
		return mix(1, uint64(b[0]))
	case 2:
		return mix(2, uint64(binary.LittleEndian.Uint16(b)))
	case 4:
		return mix(4, uint64(binary.LittleEndian.Uint32(b)))
	case 8:
		return mix(8, binary.LittleEndian.Uint64(b))
	}
	return maphash.Bytes(pl.seed, b)
}

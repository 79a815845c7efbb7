// Package share makes the objects of a store share the parts they repeat.
//
// A [Table] hash-conses objects. As it takes one, it replaces each part
// equal to a part it holds with that part's canonical copy. Parts are
// strings, pointers, slices and maps, at any depth, in typed and
// unstructured objects.
//
// # Exactness
//
// A hash only picks candidates; each is then compared field by field.
// Parts become canonical bottom up, so once a part's children are
// canonical, two parts are equal exactly when their own fields are equal
// and their children are the same copies. A comparison never goes deeper
// than one level, and a part that is not shared is never wrong.
//
// # Updates
//
// An update mostly repeats the object it replaces. Before it hashes, a
// table compares an object with the one its owner holds under the same
// key. Each part equal to the held object's becomes that part, unhashed.
// Only the parts that changed are looked up.
//
// # Release
//
// A table holds its canonical copies strongly, and estimates how much of
// what it holds no object needs any more:
//
//   - the parts an update added, which mostly replace parts of the object
//     it replaced;
//   - a deleted object's share of the table.
//
// Once that is half of what it holds, or its owner holds nothing, it
// rebuilds itself from the objects its owner still holds and those taken
// since: what no object holds any more is gone. Churn does not grow it,
// and a table whose owner holds nothing is empty. An initial list only
// adds, and never rebuilds. The owner tells the table what it holds and
// drops, through [Table.Held] and [Table.Dropped].
//
// # Contract
//
// Objects taken are shared with each other: nothing may change them, or
// any part they hold, afterwards.
package share

import (
	"bytes"
	"hash/maphash"
	"math"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Table holds the canonical parts of the objects it takes.
type Table struct {
	mu     sync.Mutex
	holder Holder
	seed   maphash.Seed

	strs  map[string]string
	boxes map[string]any // strings boxed in interfaces, as unstructured holds them
	parts map[reflect.Type]map[uint64][]reflect.Value
	// size counts the entries of strs, boxes and parts; bytes estimates
	// the heap they take (see Bytes).
	size  int
	bytes int64
	// rootSize is the size of the structs taken.
	rootSize int64
	// objects counts the objects the owner holds, as the table heard:
	// exact at each rebuild, and kept since.
	objects int
	// garbage estimates the bytes no object needs any more (see Release).
	garbage int64
	// generation counts rebuilds.
	generation int
	// taken are the objects taken that the owner does not hold yet, with
	// the generation that took them. Taken again (client-go transforms an
	// object twice in a streamed list), they are left as they are: their
	// parts may be shared by then.
	taken map[any]int
	// types caches what the table knows of each type it met.
	types map[reflect.Type]typeInfo
}

// typeInfo is what a table knows of a type.
type typeInfo struct {
	// unexported: a struct with unexported fields, which reflection cannot
	// set. Such values are hashed and compared whole.
	unexported bool
	// flat: two values with canonical parts are equal exactly when their
	// memory is. Their fields are scalars, strings, pointers, maps and
	// slices, with no interface, and no string behind an unexported field.
	flat bool
	size uintptr
}

// Holder is what a table's owner holds. client-go's cache.Store is one.
type Holder interface {
	// List returns the objects held, as pointers.
	List() []any
	// Get returns the object held under obj's key.
	Get(obj any) (item any, exists bool, err error)
}

// maxInFlight is how many rebuilds an object may be taken and not yet
// listed by live before the table forgets it: its owner dropped it.
const maxInFlight = 16

// New returns a table for the objects holder holds. The table compares
// each object with the one held under its key, and rebuilds itself from
// those held.
func New(holder Holder) *Table {
	t := &Table{holder: holder, seed: maphash.MakeSeed(), taken: map[any]int{}, types: map[reflect.Type]typeInfo{}}
	t.reset()
	return t
}

func (t *Table) reset() {
	t.strs = map[string]string{}
	t.boxes = map[string]any{}
	t.parts = map[reflect.Type]map[uint64][]reflect.Value{}
	t.size, t.bytes, t.garbage = 0, 0, 0
}

// Take replaces the parts of obj, a pointer to an object that nothing
// else holds yet, with the table's canonical copies, and adds those the
// table lacks. An object already taken is left as it is.
func (t *Table) Take(obj any) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.taken[obj]; ok {
		return
	}
	if held := t.held(obj, v.Type()); held.IsValid() {
		before := t.bytes
		t.walkAgainst(v.Elem(), held.Elem())
		t.garbage += t.bytes - before
	} else {
		t.walk(v.Elem(), true)
		t.objects++
	}
	t.taken[obj] = t.generation
	t.rootSize = int64(v.Elem().Type().Size())
	t.releaseIfDue()
}

// Held tells the table that its owner now holds obj, which it took.
func (t *Table) Held(obj any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.taken, obj)
}

// Dropped tells the table that its owner dropped obj: it was deleted.
func (t *Table) Dropped(obj any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.taken, obj)
	if t.objects > 0 {
		t.garbage += t.bytes / int64(t.objects)
		t.objects--
	}
	t.releaseIfDue()
}

// releaseIfDue rebuilds the table once half of what it holds may be
// garbage, or once its owner may hold nothing.
func (t *Table) releaseIfDue() {
	if t.size > 0 && (t.objects == 0 || 2*t.garbage >= t.bytes) {
		t.rebuild()
	}
}

// Len returns how many canonical parts the table holds.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size
}

// rebuild keeps only the parts of the objects live lists and of those
// taken and not listed yet. It only reads them: they are shared.
func (t *Table) rebuild() {
	t.reset()
	t.generation++
	live := t.holder.List()
	t.objects = len(live)
	listed := make(map[any]struct{}, len(live))
	for _, obj := range live {
		listed[obj] = struct{}{}
		t.register(obj)
	}
	for obj, gen := range t.taken {
		_, ok := listed[obj]
		if ok || t.generation-gen > maxInFlight {
			delete(t.taken, obj)
			continue
		}
		t.register(obj)
	}
}

// held returns the object the holder holds under obj's key, if it is
// another object of obj's type.
func (t *Table) held(obj any, typ reflect.Type) reflect.Value {
	h, ok, err := t.holder.Get(obj)
	if err != nil || !ok || h == obj {
		return reflect.Value{}
	}
	if v := reflect.ValueOf(h); v.Type() == typ && !v.IsNil() {
		return v
	}
	return reflect.Value{}
}

func (t *Table) register(obj any) {
	if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && !v.IsNil() {
		t.rootSize = int64(v.Elem().Type().Size())
		t.walk(v.Elem(), false)
	}
}

// walk makes v's parts canonical and returns the hash of its content.
// With own, v and all it reaches belong to the caller and are changed in
// place; without, v is only read, and its parts become canonical where
// the table has none equal.
func (t *Table) walk(v reflect.Value, own bool) uint64 {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if c := t.str(s); own && !sameString(c, s) {
			v.SetString(c)
		}
		return maphash.String(t.seed, s)
	case reflect.Bool:
		if v.Bool() {
			return 1
		}
		return 2
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return mix(3, uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return mix(4, v.Uint())
	case reflect.Float32, reflect.Float64:
		return mix(5, math.Float64bits(v.Float()))
	case reflect.Struct:
		if t.info(v.Type()).unexported {
			return t.opaqueHash(v, own)
		}
		h := uint64(v.NumField())
		for i := range v.NumField() {
			h = mix(h, t.walk(v.Field(i), own))
		}
		return h
	case reflect.Array:
		h := uint64(v.Len())
		for i := range v.Len() {
			h = mix(h, t.walk(v.Index(i), own))
		}
		return h
	case reflect.Pointer:
		if v.IsNil() {
			return 0
		}
		e := v.Elem()
		h := mix(6, t.walk(e, own))
		t.canonical(v, h, own, func(c reflect.Value) bool { return t.shallowEqual(c.Elem(), e) })
		return h
	case reflect.Slice:
		if v.IsNil() {
			return 0
		}
		var h uint64
		if v.Type().Elem().Kind() == reflect.Uint8 {
			h = maphash.Bytes(t.seed, v.Bytes())
		} else {
			h = uint64(v.Len())
			for i := range v.Len() {
				h = mix(h, t.walk(v.Index(i), own))
			}
		}
		h = mix(7, h)
		t.canonical(v, h, own, func(c reflect.Value) bool { return t.equalElems(c, v) })
		return h
	case reflect.Map:
		return t.walkMap(v, own)
	case reflect.Interface:
		if v.IsNil() {
			return 0
		}
		e := v.Elem()
		if e.Kind() == reflect.String && v.Type() == anyType {
			s := e.String()
			if own {
				box := t.box(s)
				if !sameString(box.(string), s) {
					*(*any)(v.Addr().UnsafePointer()) = box
				}
			} else {
				t.box(s)
			}
			return maphash.String(t.seed, s)
		}
		c := reflect.New(e.Type()).Elem()
		c.Set(e)
		h := mix(8, t.walk(c, own))
		if own && !sameRef(c, e) {
			v.Set(c)
		}
		return h
	default:
		// Channels, functions and unsafe pointers do not occur in API
		// objects; structures holding them are never equal.
		return 9
	}
}

// walkAgainst makes v's parts canonical, as walk does, where held, of
// v's type, has no part equal to them. Parts equal to held's become
// held's, which are canonical: an object the table took.
func (t *Table) walkAgainst(v, held reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if t.info(v.Type()).unexported {
			t.walk(v, true)
			return
		}
		for i := range v.NumField() {
			t.walkAgainst(v.Field(i), held.Field(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			t.walkAgainst(v.Index(i), held.Index(i))
		}
	case reflect.String:
		if s, h := v.String(), held.String(); s == h {
			if !sameString(s, h) {
				v.SetString(h)
			}
			return
		}
		t.walk(v, true)
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		if t.deepEqual(v, held) {
			if !sameRef(v, held) {
				v.Set(held)
			}
			return
		}
		t.walk(v, true)
	}
}

// deepEqual reports whether a, which the caller owns, and b are equal at
// every depth, as exactly as the table compares parts.
func (t *Table) deepEqual(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		if a.Kind() != reflect.Slice && a.UnsafePointer() == b.UnsafePointer() {
			return true
		}
	}
	switch a.Kind() {
	case reflect.String:
		return a.String() == b.String()
	case reflect.Pointer:
		return t.deepEqual(a.Elem(), b.Elem())
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		if a.Type().Elem().Kind() == reflect.Uint8 {
			return bytes.Equal(a.Bytes(), b.Bytes())
		}
		for i := range a.Len() {
			if !t.deepEqual(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Array:
		for i := range a.Len() {
			if !t.deepEqual(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		if as, ok := a.Interface().(map[string]string); ok {
			bs := b.Interface().(map[string]string)
			for k, av := range as {
				if bv, ok := bs[k]; !ok || av != bv {
					return false
				}
			}
			return true
		}
		k := reflect.New(a.Type().Key()).Elem()
		e := reflect.New(a.Type().Elem()).Elem()
		for it := a.MapRange(); it.Next(); {
			k.SetIterKey(it)
			e.SetIterValue(it)
			if be := b.MapIndex(k); !be.IsValid() || !t.deepEqual(e, be) {
				return false
			}
		}
		return true
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		ae, be := a.Elem(), b.Elem()
		return ae.Type() == be.Type() && t.deepEqual(ae, be)
	case reflect.Struct:
		if t.info(a.Type()).unexported {
			if a.Type() == quantityType && a.CanAddr() {
				// As walk does: the canonical form cached, a write.
				_ = a.Addr().Interface().(*resource.Quantity).String()
			}
			return t.shallowEqual(a, b)
		}
		for i := range a.NumField() {
			if !t.deepEqual(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	return t.shallowEqual(a, b)
}

// walkMap makes a map's keys and values canonical, then the map itself:
// a map equal to one the table holds becomes that map; another is rebuilt
// from its canonical keys and values, and held.
func (t *Table) walkMap(v reflect.Value, own bool) uint64 {
	if v.IsNil() {
		return 0
	}
	typ := v.Type()
	pairs := make([]reflect.Value, 0, 2*v.Len())
	h := mix(10, uint64(v.Len()))
	for it := v.MapRange(); it.Next(); {
		k := reflect.New(typ.Key()).Elem()
		k.SetIterKey(it)
		e := reflect.New(typ.Elem()).Elem()
		e.SetIterValue(it)
		// Entries are combined in an order-free way.
		h += mix(t.walk(k, own), t.walk(e, own))
		pairs = append(pairs, k, e)
	}
	equal := func(c reflect.Value) bool {
		if c.Len() != len(pairs)/2 {
			return false
		}
		for i := 0; i < len(pairs); i += 2 {
			if ce := c.MapIndex(pairs[i]); !ce.IsValid() || !t.shallowEqual(ce, pairs[i+1]) {
				return false
			}
		}
		return true
	}
	if c, ok := t.find(typ, h, equal); ok {
		if own && c.UnsafePointer() != v.UnsafePointer() {
			v.Set(c)
		}
		return h
	}
	if own {
		m := reflect.MakeMapWithSize(typ, len(pairs)/2)
		for i := 0; i < len(pairs); i += 2 {
			m.SetMapIndex(pairs[i], pairs[i+1])
		}
		v.Set(m)
	}
	t.hold(typ, h, v)
	return h
}

// canonical makes v, a pointer or slice, the table's copy equal to it, or
// holds v as that copy.
func (t *Table) canonical(v reflect.Value, h uint64, own bool, equal func(reflect.Value) bool) {
	if c, ok := t.find(v.Type(), h, equal); ok {
		if own && !sameRef(c, v) {
			v.Set(c)
		}
		return
	}
	if v.Kind() == reflect.Slice {
		// Held without spare capacity, so that an append copies. The
		// object holds it so too: its memory then equals its equals'.
		c := v.Slice3(0, v.Len(), v.Len())
		if own {
			v.Set(c)
		}
		t.hold(v.Type(), h, c)
		return
	}
	t.hold(v.Type(), h, v)
}

func (t *Table) find(typ reflect.Type, h uint64, equal func(reflect.Value) bool) (reflect.Value, bool) {
	for _, c := range t.parts[typ][h] {
		if equal(c) {
			return c, true
		}
	}
	return reflect.Value{}, false
}

func (t *Table) hold(typ reflect.Type, h uint64, v reflect.Value) {
	byHash := t.parts[typ]
	if byHash == nil {
		byHash = map[uint64][]reflect.Value{}
		t.parts[typ] = byHash
	}
	byHash[h] = append(byHash[h], v)
	t.size++
	t.bytes += partBytes(v) + partIndexBytes
}

func (t *Table) str(s string) string {
	if s == "" {
		// One empty string, so that equal values have equal memory.
		return ""
	}
	if c, ok := t.strs[s]; ok {
		return c
	}
	t.strs[s] = s
	t.size++
	t.bytes += int64(len(s)) + stringIndexBytes
	return s
}

func (t *Table) box(s string) any {
	if c, ok := t.boxes[s]; ok {
		return c
	}
	var box any = t.str(s)
	t.boxes[s] = box
	t.size++
	t.bytes += int64(reflect.TypeFor[string]().Size()) + stringIndexBytes
	return box
}

var (
	anyType      = reflect.TypeFor[any]()
	quantityType = reflect.TypeFor[resource.Quantity]()
	// timeType is what metav1.Time and MicroTime embed.
	timeType = reflect.TypeFor[time.Time]()
)

// opaqueHash hashes a struct with unexported fields: the types API objects
// hold (quantities, times) by their value, others by their scalar
// fields.
func (t *Table) opaqueHash(v reflect.Value, own bool) uint64 {
	switch v.Type() {
	case quantityType:
		q := v.Addr().Interface().(*resource.Quantity)
		if own {
			// String caches the canonical form in the quantity, a write;
			// made now, later calls by readers only read.
			_ = q.String()
		}
		return mix(11, uint64(q.MilliValue()))
	case timeType:
		if v.CanAddr() {
			// Through a pointer: boxing the value would allocate.
			return mix(12, uint64(v.Addr().Interface().(*time.Time).UnixNano()))
		}
		return mix(12, uint64(v.Interface().(time.Time).UnixNano()))
	}
	h := uint64(13)
	for i := range v.NumField() {
		h = mix(h, hashOnly(v.Field(i)))
	}
	return h
}

// hashOnly hashes the scalars of v, and its pointers by address, without
// walking into what it references. Unexported fields can be read so.
func hashOnly(v reflect.Value) uint64 {
	switch v.Kind() {
	case reflect.String:
		return maphash.String(hashSeed, v.String())
	case reflect.Bool:
		if v.Bool() {
			return 1
		}
		return 2
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return uint64(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint()
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(v.Float())
	case reflect.Pointer:
		return uint64(v.Pointer())
	}
	return 0
}

// hashSeed seeds hashOnly: its hashes need not differ between tables.
var hashSeed = maphash.MakeSeed()

// shallowEqual reports whether a and b, of one type and with canonical
// parts, are equal: their own fields equal, their parts the same copies.
func (t *Table) shallowEqual(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		// Bits, not ==: 0 and -0 differ, and NaN equals itself.
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Pointer, reflect.Map, reflect.Slice:
		return sameRef(a, b)
	case reflect.Struct:
		info := t.info(a.Type())
		if info.flat && a.CanAddr() && b.CanAddr() {
			return sameMemory(a.Addr().UnsafePointer(), b.Addr().UnsafePointer(), info.size)
		}
		if info.unexported {
			if a.Type().Comparable() {
				return a.Equal(b)
			}
			return reflect.DeepEqual(a.Interface(), b.Interface())
		}
		for i := range a.NumField() {
			if !t.shallowEqual(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Array:
		return t.equalElems(a, b)
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		ae, be := a.Elem(), b.Elem()
		return ae.Type() == be.Type() && t.shallowEqual(ae, be)
	}
	return false
}

// equalElems reports whether two slices or arrays hold equal elements.
func (t *Table) equalElems(a, b reflect.Value) bool {
	if a.Kind() == reflect.Slice && a.IsNil() != b.IsNil() || a.Len() != b.Len() {
		return false
	}
	if a.Kind() == reflect.Slice && a.Type().Elem().Kind() == reflect.Uint8 {
		return bytes.Equal(a.Bytes(), b.Bytes())
	}
	if a.Kind() == reflect.Slice && a.Len() > 0 {
		if info := t.info(a.Type().Elem()); info.flat {
			return sameMemory(a.UnsafePointer(), b.UnsafePointer(), uintptr(a.Len())*info.size)
		}
	}
	for i := range a.Len() {
		if !t.shallowEqual(a.Index(i), b.Index(i)) {
			return false
		}
	}
	return true
}

// sameMemory reports whether n bytes at a and at b are equal. For flat
// values with canonical parts, that is equality: equal strings, pointers,
// maps and slices are the same copies.
func sameMemory(a, b unsafe.Pointer, n uintptr) bool {
	return a == b || bytes.Equal(unsafe.Slice((*byte)(a), n), unsafe.Slice((*byte)(b), n))
}

// sameRef reports whether a and b are the same copy: the same string
// bytes, pointer, map, or slice elements and length. Other kinds are
// values, never replaced.
func sameRef(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.String:
		return sameString(a.String(), b.String())
	case reflect.Pointer, reflect.Map:
		return a.UnsafePointer() == b.UnsafePointer()
	case reflect.Slice:
		return a.IsNil() == b.IsNil() && a.UnsafePointer() == b.UnsafePointer() && a.Len() == b.Len()
	}
	return true
}

func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// info returns what the table knows of typ, learning it the first time.
func (t *Table) info(typ reflect.Type) typeInfo {
	if info, ok := t.types[typ]; ok {
		return info
	}
	info := typeInfo{flat: flat(typ, false), size: typ.Size()}
	if typ.Kind() == reflect.Struct {
		for i := range typ.NumField() {
			if !typ.Field(i).IsExported() {
				info.unexported = true
				break
			}
		}
	}
	t.types[typ] = info
	return info
}

// flat reports whether values of typ with canonical parts are equal
// exactly when their memory is. Behind an unexported field (hidden), a
// string is not made canonical, so it is not flat.
func flat(typ reflect.Type, hidden bool) bool {
	switch typ.Kind() {
	case reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return false
	case reflect.String:
		return !hidden
	case reflect.Array:
		return flat(typ.Elem(), hidden)
	case reflect.Struct:
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !flat(f.Type, hidden || !f.IsExported()) {
				return false
			}
		}
	}
	return true
}

// mix combines a hash with another value.
func mix(h, x uint64) uint64 {
	h ^= x + 0x9e3779b97f4a7c15 + h<<6 + h>>2
	h *= 0xff51afd7ed558ccd
	return h ^ h>>33
}

// Package share makes the objects of a store share the parts they repeat.
//
// A [Table] hash-conses objects. As it takes one, it replaces each part
// equal to a part it holds with that part's canonical copy. Parts are
// strings, pointers, slices and maps, at any depth, in typed and
// unstructured objects. An object's name, UID and resource version are
// left as they are: no other object holds them.
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
// Once that is half of what it holds, or its owners hold nothing, a
// table's pool rebuilds itself from the objects the owners of its tables
// still hold and those taken but not held yet: what no object holds any
// more is gone. Churn does not grow it, and a pool whose owners hold
// nothing is empty. An initial list only
// adds, and never rebuilds. The owner tells the table what it holds and
// drops, through [Table.Held] and [Table.Dropped].
//
// # Encodings
//
// A [Wire] holds a protobuf encoding in parts, for a store held as bytes.
// A [WireSplitter] shares a field of 32 bytes or more if the encoding an
// update replaces shares it, or once it has seen it in another encoding.
// It splits any other such field that parses as a message, in case its
// own fields repeat. Shorter fields stay inline. Shared fields are held
// through package unique, so a field no encoding holds is released by the
// collector. A hash only picks the fields to share: unique compares them
// whole.
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
	"slices"
	"sync"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
)

// A Pool holds the canonical parts of the objects its tables take. A
// pool of one table serves one store. Stores of one kind in several
// clusters may share a pool: the same Deployment in ten clusters then
// keeps one copy of what its Pods repeat.
type Pool struct {
	mu   sync.Mutex
	seed maphash.Seed
	// tables are the pool's, each one store's.
	tables map[*Table]struct{}

	strs  map[string]string
	boxes map[string]any // strings boxed in interfaces, as unstructured holds them
	// parts are the canonical pointers, slices and maps, by the hash of
	// their content and shape; more holds those whose key a first part
	// took.
	parts map[uint64]part
	more  map[uint64][]part
	// size counts the entries of strs, boxes and parts; bytes estimates
	// the heap they take (see Bytes).
	size  int
	bytes int64
	// rootSize is the size of the structs taken.
	rootSize int64
	// objects counts the objects the owners hold, as the pool heard:
	// exact at each rebuild, and kept since.
	objects int
	// garbage estimates the bytes no object needs any more (see Release).
	garbage int64
	// generation counts rebuilds.
	generation int
	// taken are the objects taken that their owner does not hold yet,
	// with the generation that took them. Taken again (client-go
	// transforms an object twice in a streamed list), they are left as
	// they are: their parts may be shared by then.
	taken map[any]takenBy
	// types caches what the pool knows of each type it met.
	types map[reflect.Type]typeInfo
	// reused holds, during TakeReusing, the parts its caller says are
	// canonical already, by address.
	reused map[unsafe.Pointer]Reused
}

// takenBy is when an object not held yet was taken, and by which table.
type takenBy struct {
	generation int
	table      *Table
}

// A Table is one store's part in a pool: it takes the store's objects,
// comparing each with the one its store holds under the same key.
type Table struct {
	pool   *Pool
	holder Holder
	// listed is how many objects holder listed at the pool's last
	// rebuild.
	listed int
	// closed is set by Close: the table takes and drops nothing more.
	closed bool
}

// Reused is a value inside an object that is canonical already, as a
// decoder that took it from an earlier object knows: its type, and its
// hash in the table (PartHash), or 0 for a value whose hash mixes only
// into its object's own.
type Reused struct {
	Type reflect.Type
	Hash uint64
}

// A part is a canonical pointer, slice or map: its shape, where it
// points, and a slice's length.
type part struct {
	s *shape
	p unsafe.Pointer
	n int
}

// typeInfo is what a pool knows of a type: its shape.
type typeInfo struct{ shape *shape }

// Holder is what a table's owner holds. client-go's cache.Store is one.
type Holder interface {
	// List returns the objects held, as pointers.
	List() []any
	// Get returns the object held under obj's key.
	Get(obj any) (item any, exists bool, err error)
}

// maxInFlight is how many rebuilds an object may be taken and not yet
// listed by live before the pool forgets it: its owner dropped it.
const maxInFlight = 16

// New returns a table of a pool of its own, for the objects holder
// holds.
func New(holder Holder) *Table { return NewPool().Table(holder) }

// NewPool returns a pool of no table.
func NewPool() *Pool {
	pl := &Pool{seed: maphash.MakeSeed(), tables: map[*Table]struct{}{}, taken: map[any]takenBy{}, types: map[reflect.Type]typeInfo{}}
	pl.reset()
	return pl
}

// Table returns a table of the pool for the objects holder holds. The
// table compares each object with the one held under its key, and the
// pool rebuilds itself from what its tables' holders hold. Close the
// table once its holder is gone.
func (pl *Pool) Table(holder Holder) *Table {
	t := &Table{pool: pl, holder: holder}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.tables[t] = struct{}{}
	return t
}

func (pl *Pool) reset() {
	pl.strs = map[string]string{}
	pl.boxes = map[string]any{}
	pl.parts = map[uint64]part{}
	pl.more = map[uint64][]part{}
	pl.size, pl.bytes, pl.garbage = 0, 0, 0
}

// Close tells the pool that t's holder is gone: its objects' parts go,
// unless others hold them. The pool rebuilds at once. From then on, t
// takes and drops nothing: an informer still stopping may hand it
// objects, which must not count in the pool.
func (t *Table) Close() {
	pl := t.pool
	pl.mu.Lock()
	defer pl.mu.Unlock()
	t.closed = true
	if _, ok := pl.tables[t]; !ok {
		return
	}
	delete(pl.tables, t)
	for obj, by := range pl.taken {
		if by.table == t {
			delete(pl.taken, obj)
		}
	}
	pl.rebuild()
}

// Take replaces the parts of obj, a pointer to an object that nothing
// else holds yet, with the pool's canonical copies, and adds those the
// pool lacks. An object already taken is left as it is.
func (t *Table) Take(obj any) { t.TakeReusing(obj, nil) }

// TakeReusing takes obj, as Take does, knowing that the values reused
// holds by address are canonical already: they are not walked again. An
// address holds one value: a value and its first field share their
// address, but a value reused whole has no field reused apart.
func (t *Table) TakeReusing(obj any, reused map[unsafe.Pointer]Reused) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	pl := t.pool
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if t.closed {
		return
	}
	if _, ok := pl.taken[obj]; ok {
		return
	}
	if len(reused) > 0 {
		pl.reused = reused
		defer func() { pl.reused = nil }()
	}
	if held := t.held(obj, v.Type()); held.IsValid() {
		before := pl.bytes
		pl.walkAgainst(v.Elem(), held.Elem())
		pl.garbage += pl.bytes - before
	} else {
		pl.walk(v.Elem(), true)
		pl.objects++
	}
	pl.taken[obj] = takenBy{pl.generation, t}
	pl.rootSize = int64(v.Elem().Type().Size())
	pl.releaseIfDue()
}

// Held tells the table that its owner now holds obj, which it took.
func (t *Table) Held(obj any) {
	pl := t.pool
	pl.mu.Lock()
	defer pl.mu.Unlock()
	delete(pl.taken, obj)
}

// Dropped tells the table that its owner dropped obj: it was deleted.
func (t *Table) Dropped(obj any) {
	pl := t.pool
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if t.closed {
		return
	}
	delete(pl.taken, obj)
	if pl.objects > 0 {
		pl.garbage += pl.bytes / int64(pl.objects)
		pl.objects--
	}
	pl.releaseIfDue()
}

// releaseIfDue rebuilds the pool once half of what it holds may be
// garbage, or once its owners may hold nothing.
func (pl *Pool) releaseIfDue() {
	if pl.size > 0 && (pl.objects == 0 || 2*pl.garbage >= pl.bytes) {
		pl.rebuild()
	}
}

// PartHash returns the hash of the canonical value of type typ at p, as
// the pool hashes it inside an object: what TakeReusing is told.
func (t *Table) PartHash(typ reflect.Type, p unsafe.Pointer) uint64 {
	pl := t.pool
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.walkAt(pl.shapeOf(typ), p, reading)
}

// Generation counts the pool's rebuilds. Parts canonical before one may
// be held by no object since.
func (t *Table) Generation() int {
	pl := t.pool
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.generation
}

// Listed returns how many objects the table's owner listed at the pool's
// last rebuild: none, if it held nothing then, though other tables of the
// pool may.
func (t *Table) Listed() int {
	pl := t.pool
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return t.listed
}

// Len returns how many canonical parts the pool holds.
func (t *Table) Len() int {
	pl := t.pool
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.size
}

// rebuild keeps only the parts of the objects the holders list and of
// those taken and not listed yet. It only reads them: they are shared.
func (pl *Pool) rebuild() {
	pl.reset()
	pl.generation++
	pl.objects = 0
	listed := map[any]struct{}{}
	for t := range pl.tables {
		live := t.holder.List()
		t.listed = len(live)
		pl.objects += len(live)
		for _, obj := range live {
			listed[obj] = struct{}{}
			pl.register(obj)
		}
	}
	for obj, by := range pl.taken {
		_, ok := listed[obj]
		if ok || pl.generation-by.generation > maxInFlight {
			delete(pl.taken, obj)
			continue
		}
		pl.register(obj)
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

func (pl *Pool) register(obj any) {
	if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && !v.IsNil() {
		pl.rootSize = int64(v.Elem().Type().Size())
		pl.walk(v.Elem(), false)
	}
}

// walk makes v's parts canonical and returns the hash of its content.
// With own, v and all it reaches belong to the caller and are changed in
// place; without, v is only read, and its parts become canonical where
// the table has none equal. v is addressable.
func (pl *Pool) walk(v reflect.Value, own bool) uint64 {
	m := reading
	if own {
		m = owning
	}
	return pl.walkAt(pl.shapeOf(v.Type()), v.Addr().UnsafePointer(), m)
}

// A mode is how walkAt treats what it walks.
type mode uint8

const (
	// reading leaves a value as it is. Its parts become canonical where
	// the table has none equal.
	reading mode = iota
	// owning changes a value the caller owns in place.
	owning
)

// walkAt walks the value of shape s at p, as walk does, and returns the
// hash of its content.
func (pl *Pool) walkAt(s *shape, p unsafe.Pointer, m mode) uint64 {
	if s.plain {
		return pl.hashMemory(p, s.size)
	}
	if pl.reused != nil && s.kind != reflect.String {
		if r, ok := pl.reused[p]; ok && r.Type == s.typ {
			return r.Hash
		}
	}
	switch s.kind {
	case reflect.String:
		sp := (*string)(p)
		c := ""
		if !s.unique {
			c = pl.str(*sp)
		} else if *sp != "" {
			// Its object alone holds it: counted as the table's, so that
			// Bytes counts it once.
			pl.bytes += int64(len(*sp))
			return maphash.String(pl.seed, *sp)
		}
		if m == owning && !sameString(c, *sp) {
			*sp = c
		}
		return maphash.String(pl.seed, c)
	case reflect.Struct:
		if s.opaque {
			return pl.opaqueHash(s, p, m == owning)
		}
		h := uint64(len(s.fields))
		for _, f := range s.fields {
			if f.shape == nil {
				h = mix(h, pl.hashMemory(unsafe.Add(p, f.off), f.size))
			} else {
				h = mix(h, pl.walkAt(f.shape, unsafe.Add(p, f.off), m))
			}
		}
		return h
	case reflect.Array:
		h := uint64(s.n)
		for i := range s.n {
			h = mix(h, pl.walkAt(s.elem, at(p, s.elem, i), m))
		}
		return h
	case reflect.Pointer, reflect.Slice, reflect.Map:
		if *(*unsafe.Pointer)(p) == nil {
			return 0
		}
		h := pl.walkPart(s, p, m)
		if !pl.share(s, p, h, m) {
			pl.keep(s, p, h, m)
		}
		return h
	case reflect.Interface:
		return pl.walkInterface(s, p, m)
	}
	// Channels, functions and unsafe pointers do not occur in API
	// objects; structures holding them are never equal.
	return 9
}

// walkPart walks what the pointer, slice or map of shape s at p reaches,
// and returns the hash of its content.
func (pl *Pool) walkPart(s *shape, p unsafe.Pointer, m mode) uint64 {
	switch s.kind {
	case reflect.Pointer:
		return mix(6, pl.walkAt(s.elem, *(*unsafe.Pointer)(p), m))
	case reflect.Slice:
		sh := (*sliceHeader)(p)
		if s.elem.plain {
			return mix(7, maphash.Bytes(pl.seed, unsafe.Slice((*byte)(sh.data), uintptr(sh.len)*s.elem.size)))
		}
		h := uint64(sh.len)
		for i := range sh.len {
			h = mix(h, pl.walkAt(s.elem, at(sh.data, s.elem, i), m))
		}
		return mix(7, h)
	}
	switch s.maps {
	case stringMap:
		return walkKeyed(pl, *(*map[string]string)(p), m, stringValue)
	case quantityMap:
		return walkKeyed(pl, *(*map[string]resource.Quantity)(p), m, quantityValue)
	}
	return pl.walkEntries(s, p, m)
}

// walkInterface walks the interface of shape s at p.
func (pl *Pool) walkInterface(s *shape, p unsafe.Pointer, m mode) uint64 {
	w := (*[2]unsafe.Pointer)(p)
	if w[0] == nil {
		return 0
	}
	es, ep := pl.dynamic(s, p)
	switch {
	case es.kind == reflect.String && s.typ == anyType:
		str := *(*string)(ep)
		if box := pl.box(str); m == owning && !sameString(box.(string), str) {
			*(*any)(p) = box
		}
		return maphash.String(pl.seed, str)
	case ep != nil && (m != owning || es.plain || es.kind == reflect.Pointer || es.kind == reflect.Map):
		// Read in place, or changed in the interface itself.
		return mix(8, pl.walkAt(es, ep, m))
	}
	// Boxed elsewhere: walked in a copy, boxed anew if it changed.
	v := reflect.NewAt(s.typ, p).Elem()
	e := v.Elem()
	c := reflect.New(es.typ).Elem()
	c.Set(e)
	h := mix(8, pl.walkAt(es, c.Addr().UnsafePointer(), m))
	if m == owning && !sameRef(c, e) {
		v.Set(c)
	}
	return h
}

// dynamic returns the shape of the value in the non-nil interface of
// shape s at p, and the value's address where it can be read in place:
// pointers and maps in the interface itself, plain values, strings and
// slices in a box. Other values may be either; their address is nil.
func (pl *Pool) dynamic(s *shape, p unsafe.Pointer) (*shape, unsafe.Pointer) {
	w := (*[2]unsafe.Pointer)(p)
	e := pl.shapeOf(reflect.NewAt(s.typ, p).Elem().Elem().Type())
	switch {
	case e.kind == reflect.Pointer || e.kind == reflect.Map:
		return e, unsafe.Pointer(&w[1])
	case e.plain || e.kind == reflect.String || e.kind == reflect.Slice:
		return e, w[1]
	}
	return e, nil
}

// walkKeyed walks a map keyed by strings. value walks a value, and
// returns it as walked, whether that changed it, and its hash. Owned, a
// map is changed in place: assigned to an existing key, an entry takes
// the key given, equal to the one it replaces.
func walkKeyed[V comparable](pl *Pool, mp map[string]V, m mode, value func(pl *Pool, v V, m mode) (V, bool, uint64)) uint64 {
	h := mix(10, uint64(len(mp)))
	for k, v := range mp {
		c, changed, vh := value(pl, v, m)
		// Entries are combined in an order-free way.
		h += mix(maphash.String(pl.seed, k), vh)
		if ck := pl.str(k); m == owning && (changed || !sameString(ck, k)) {
			mp[ck] = c
		}
	}
	return h
}

func stringValue(pl *Pool, v string, _ mode) (string, bool, uint64) {
	c := pl.str(v)
	return c, !sameString(c, v), maphash.String(pl.seed, v)
}

func quantityValue(_ *Pool, q resource.Quantity, m mode) (resource.Quantity, bool, uint64) {
	c := q
	h := hashQuantity(&c, m == owning)
	return c, c != q, h
}

// cachedQuantity returns q with its canonical form cached, as walk
// leaves a quantity it owns.
func cachedQuantity(q resource.Quantity) resource.Quantity {
	_ = q.String()
	return q
}

// walkEntries walks a map's keys and values through reflection. Owned,
// a map is changed in place, or rebuilt where walking could change keys.
func (pl *Pool) walkEntries(s *shape, p unsafe.Pointer, m mode) uint64 {
	mv := reflect.NewAt(s.typ, p).Elem()
	k, e := reflect.New(s.key.typ).Elem(), reflect.New(s.elem.typ).Elem()
	kp, ep := k.Addr().UnsafePointer(), e.Addr().UnsafePointer()
	into, rebuilt := mv, m == owning && s.maps == rebuiltMap
	if rebuilt {
		into = reflect.MakeMapWithSize(s.typ, mv.Len())
	}
	h := mix(10, uint64(mv.Len()))
	for it := mv.MapRange(); it.Next(); {
		k.SetIterKey(it)
		e.SetIterValue(it)
		// Entries are combined in an order-free way.
		h += mix(pl.walkAt(s.key, kp, m), pl.walkAt(s.elem, ep, m))
		if m == owning {
			into.SetMapIndex(k, e)
		}
	}
	if rebuilt {
		mv.Set(into)
	}
	return h
}

// share makes the part at p, a pointer, slice or map of shape s, whose
// parts are canonical, the table's copy equal to it, and reports whether
// the table has one.
func (pl *Pool) share(s *shape, p unsafe.Pointer, h uint64, m mode) bool {
	k := partKey(s, h)
	c, ok := pl.parts[k]
	if !ok {
		return false
	}
	if c.s != s || !pl.equalPart(c, p) {
		i := slices.IndexFunc(pl.more[k], func(c part) bool { return c.s == s && pl.equalPart(c, p) })
		if i < 0 {
			return false
		}
		c = pl.more[k][i]
	}
	if m != owning {
		return true
	}
	if s.kind == reflect.Slice {
		*(*sliceHeader)(p) = sliceHeader{c.p, c.n, c.n}
	} else {
		*(*unsafe.Pointer)(p) = c.p
	}
	return true
}

// partKey is the key of a part of shape s whose content hashes to h.
func partKey(s *shape, h uint64) uint64 { return mix(h, uint64(uintptr(unsafe.Pointer(s)))) }

// keep holds the part at p, a pointer, slice or map of shape s, as the
// canonical copy of its content. What it holds does not refer to p.
func (pl *Pool) keep(s *shape, p unsafe.Pointer, h uint64, m mode) {
	c := part{s: s, p: *(*unsafe.Pointer)(p)}
	if s.kind == reflect.Slice {
		// Held without spare capacity, so that an append copies. The
		// object holds it so too: its memory then equals its equals'.
		sh := (*sliceHeader)(p)
		if m == owning {
			sh.cap = sh.len
		}
		c.n = sh.len
		pl.bytes += int64(sh.len) * int64(s.elem.size)
	} else {
		pl.bytes += partBytes(reflect.NewAt(s.typ, p).Elem())
	}
	k := partKey(s, h)
	if _, ok := pl.parts[k]; ok {
		pl.more[k] = append(pl.more[k], c)
	} else {
		pl.parts[k] = c
	}
	pl.size++
	pl.bytes += partIndexBytes
}

// equalPart reports whether the part at p, of c's shape, with canonical
// parts, equals c, a part the table holds.
func (pl *Pool) equalPart(c part, p unsafe.Pointer) bool {
	switch s := c.s; s.kind {
	case reflect.Pointer:
		return pl.equalAt(s.elem, *(*unsafe.Pointer)(p), c.p)
	case reflect.Slice:
		sh := (*sliceHeader)(p)
		return c.n == sh.len && pl.elemsEqual(s.elem, sh.data, c.p, sh.len, false)
	}
	return pl.equalMaps(c.s, *(*unsafe.Pointer)(p), c.p, false)
}

// walkAgainst makes v's parts canonical, as walk does, where held, of
// v's type, has no part equal to them. Parts equal to held's become
// held's, which are canonical: an object the table took.
func (pl *Pool) walkAgainst(v, held reflect.Value) {
	pl.walkAgainstAt(pl.shapeOf(v.Type()), v.Addr().UnsafePointer(), held.Addr().UnsafePointer())
}

func (pl *Pool) walkAgainstAt(s *shape, p, held unsafe.Pointer) {
	if s.plain {
		return
	}
	if pl.reused != nil && s.kind != reflect.String {
		// Canonical already, and maybe another object's: only read.
		if r, ok := pl.reused[p]; ok && r.Type == s.typ {
			return
		}
	}
	switch s.kind {
	case reflect.Struct:
		if s.opaque {
			pl.walkAt(s, p, owning)
			return
		}
		for _, f := range s.fields {
			if f.shape != nil {
				pl.walkAgainstAt(f.shape, unsafe.Add(p, f.off), unsafe.Add(held, f.off))
			}
		}
	case reflect.Array:
		for i := range s.n {
			pl.walkAgainstAt(s.elem, at(p, s.elem, i), at(held, s.elem, i))
		}
	case reflect.String:
		if a, b := (*string)(p), (*string)(held); *a == *b {
			if !sameString(*a, *b) {
				*a = *b
			}
			return
		}
		pl.walkAt(s, p, owning)
	case reflect.Pointer, reflect.Map:
		if pl.deepEqualAt(s, p, held) {
			*(*unsafe.Pointer)(p) = *(*unsafe.Pointer)(held)
			return
		}
		pl.walkAt(s, p, owning)
	case reflect.Slice:
		if pl.deepEqualAt(s, p, held) {
			*(*sliceHeader)(p) = *(*sliceHeader)(held)
			return
		}
		pl.walkAt(s, p, owning)
	case reflect.Interface:
		if pl.deepEqualAt(s, p, held) {
			*(*[2]unsafe.Pointer)(p) = *(*[2]unsafe.Pointer)(held)
			return
		}
		pl.walkAt(s, p, owning)
	}
}

// deepEqualAt reports whether the values of shape s at a, which the
// caller owns, and at b are equal at every depth, as exactly as the table
// compares parts.
func (pl *Pool) deepEqualAt(s *shape, a, b unsafe.Pointer) bool {
	if s.plain {
		return sameMemory(a, b, s.size)
	}
	switch s.kind {
	case reflect.String:
		return *(*string)(a) == *(*string)(b)
	case reflect.Pointer:
		x, y := *(*unsafe.Pointer)(a), *(*unsafe.Pointer)(b)
		if x == nil || y == nil || x == y {
			return x == y
		}
		return pl.deepEqualAt(s.elem, x, y)
	case reflect.Slice:
		x, y := (*sliceHeader)(a), (*sliceHeader)(b)
		if (x.data == nil) != (y.data == nil) || x.len != y.len {
			return false
		}
		return pl.elemsEqual(s.elem, x.data, y.data, x.len, true)
	case reflect.Array:
		return pl.elemsEqual(s.elem, a, b, s.n, true)
	case reflect.Map:
		x, y := *(*unsafe.Pointer)(a), *(*unsafe.Pointer)(b)
		if x == nil || y == nil || x == y {
			return x == y
		}
		return pl.equalMaps(s, x, y, true)
	case reflect.Interface:
		return pl.equalInterfaces(s, a, b, true)
	case reflect.Struct:
		if s.opaque {
			if s.typ == quantityType {
				// As walk does: the canonical form cached, a write.
				_ = (*resource.Quantity)(a).String()
			}
			return pl.equalAt(s, a, b)
		}
		for _, f := range s.fields {
			x, y := unsafe.Add(a, f.off), unsafe.Add(b, f.off)
			if f.shape == nil && !sameMemory(x, y, f.size) || f.shape != nil && !pl.deepEqualAt(f.shape, x, y) {
				return false
			}
		}
		return true
	}
	return pl.equalAt(s, a, b)
}

// equalMaps reports whether the maps a and b, of shape s, are equal: with
// deep, at every depth; without, with a's parts canonical, as equalAt
// compares values.
func (pl *Pool) equalMaps(s *shape, a, b unsafe.Pointer, deep bool) bool {
	switch s.maps {
	case stringMap:
		return equalKeyed(*(*map[string]string)(unsafe.Pointer(&a)), *(*map[string]string)(unsafe.Pointer(&b)), nil)
	case quantityMap:
		return equalKeyed(*(*map[string]resource.Quantity)(unsafe.Pointer(&a)), *(*map[string]resource.Quantity)(unsafe.Pointer(&b)), cachedQuantity)
	}
	x, y := reflect.New(s.typ).Elem(), reflect.New(s.typ).Elem()
	*(*unsafe.Pointer)(x.Addr().UnsafePointer()) = a
	*(*unsafe.Pointer)(y.Addr().UnsafePointer()) = b
	if x.Len() != y.Len() {
		return false
	}
	k, e, f := reflect.New(s.key.typ).Elem(), reflect.New(s.elem.typ).Elem(), reflect.New(s.elem.typ).Elem()
	ep, fp := e.Addr().UnsafePointer(), f.Addr().UnsafePointer()
	for it := x.MapRange(); it.Next(); {
		k.SetIterKey(it)
		g := y.MapIndex(k)
		if !g.IsValid() {
			return false
		}
		e.SetIterValue(it)
		f.Set(g)
		if deep && !pl.deepEqualAt(s.elem, ep, fp) || !deep && !pl.equalAt(s.elem, ep, fp) {
			return false
		}
	}
	return true
}

// equalKeyed reports whether two maps keyed by strings hold equal
// entries, a's values as norm returns them.
func equalKeyed[V comparable](a, b map[string]V, norm func(V) V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok {
			return false
		}
		if v != w && (norm == nil || norm(v) != w) {
			return false
		}
	}
	return true
}

// equalAt reports whether the values of shape s at a and b, with
// canonical parts, are equal: their own fields equal, their parts the
// same copies.
func (pl *Pool) equalAt(s *shape, a, b unsafe.Pointer) bool {
	switch s.kind {
	case reflect.String:
		return *(*string)(a) == *(*string)(b)
	case reflect.Pointer, reflect.Map:
		return *(*unsafe.Pointer)(a) == *(*unsafe.Pointer)(b)
	case reflect.Slice:
		x, y := (*sliceHeader)(a), (*sliceHeader)(b)
		return x.data == y.data && x.len == y.len
	case reflect.Interface:
		return pl.equalInterfaces(s, a, b, false)
	}
	if s.flat {
		return sameMemory(a, b, s.size)
	}
	switch s.kind {
	case reflect.Struct:
		if s.opaque {
			return opaqueEqual(s, a, b)
		}
		for _, f := range s.fields {
			x, y := unsafe.Add(a, f.off), unsafe.Add(b, f.off)
			if f.shape == nil && !sameMemory(x, y, f.size) || f.shape != nil && !pl.equalAt(f.shape, x, y) {
				return false
			}
		}
		return true
	case reflect.Array:
		return pl.elemsEqual(s.elem, a, b, s.n, false)
	}
	return false
}

// elemsEqual reports whether n elements of shape s at a and at b are
// equal: as deepEqualAt compares them (deep), or as equalAt does.
func (pl *Pool) elemsEqual(s *shape, a, b unsafe.Pointer, n int, deep bool) bool {
	if a == b || s.plain || !deep && s.flat {
		return sameMemory(a, b, uintptr(n)*s.size)
	}
	for i := range n {
		x, y := at(a, s, i), at(b, s, i)
		if deep && !pl.deepEqualAt(s, x, y) || !deep && !pl.equalAt(s, x, y) {
			return false
		}
	}
	return true
}

// equalInterfaces reports whether the interfaces of shape s at a and b
// hold values of one type, equal as deepEqualAt (deep) or equalAt
// compares them.
func (pl *Pool) equalInterfaces(s *shape, a, b unsafe.Pointer, deep bool) bool {
	x, y := (*[2]unsafe.Pointer)(a), (*[2]unsafe.Pointer)(b)
	// The first word is the type, or the itab of the interface and type.
	if x[0] != y[0] {
		return false
	}
	if x[0] == nil || x[1] == y[1] {
		return true
	}
	e, xp := pl.dynamic(s, a)
	_, yp := pl.dynamic(s, b)
	if xp == nil {
		xc, yc := reflect.New(e.typ).Elem(), reflect.New(e.typ).Elem()
		xc.Set(reflect.NewAt(s.typ, a).Elem().Elem())
		yc.Set(reflect.NewAt(s.typ, b).Elem().Elem())
		xp, yp = xc.Addr().UnsafePointer(), yc.Addr().UnsafePointer()
	}
	if deep {
		return pl.deepEqualAt(e, xp, yp)
	}
	return pl.equalAt(e, xp, yp)
}

func (pl *Pool) str(s string) string {
	if s == "" {
		// One empty string, so that equal values have equal memory.
		return ""
	}
	if c, ok := pl.strs[s]; ok {
		return c
	}
	pl.strs[s] = s
	pl.size++
	pl.bytes += int64(len(s)) + stringIndexBytes
	return s
}

func (pl *Pool) box(s string) any {
	if c, ok := pl.boxes[s]; ok {
		return c
	}
	var box any = pl.str(s)
	pl.boxes[s] = box
	pl.size++
	pl.bytes += int64(reflect.TypeFor[string]().Size()) + stringIndexBytes
	return box
}

var (
	anyType      = reflect.TypeFor[any]()
	quantityType = reflect.TypeFor[resource.Quantity]()
	// timeType is what metav1.Time and MicroTime embed.
	timeType = reflect.TypeFor[time.Time]()
)

// opaqueHash hashes the struct with unexported fields of shape s at p:
// the types API objects hold (quantities, times) by their value, others
// by their scalar fields.
func (pl *Pool) opaqueHash(s *shape, p unsafe.Pointer, own bool) uint64 {
	switch s.typ {
	case quantityType:
		return hashQuantity((*resource.Quantity)(p), own)
	case timeType:
		return mix(12, uint64((*time.Time)(p).UnixNano()))
	}
	v := reflect.NewAt(s.typ, p).Elem()
	h := uint64(13)
	for i := range v.NumField() {
		h = mix(h, hashOnly(v.Field(i)))
	}
	return h
}

func hashQuantity(q *resource.Quantity, own bool) uint64 {
	if own {
		// String caches the canonical form in the quantity, a write;
		// made now, later calls by readers only read.
		_ = q.String()
	}
	return mix(11, uint64(q.MilliValue()))
}

// opaqueEqual reports whether the structs with unexported fields of
// shape s at a and b are equal, field by field.
func opaqueEqual(s *shape, a, b unsafe.Pointer) bool {
	if s.typ == quantityType {
		return *(*resource.Quantity)(a) == *(*resource.Quantity)(b)
	}
	x, y := reflect.NewAt(s.typ, a).Elem(), reflect.NewAt(s.typ, b).Elem()
	if s.typ.Comparable() {
		return x.Equal(y)
	}
	return reflect.DeepEqual(x.Interface(), y.Interface())
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

// flat reports whether values of typ with canonical parts are equal
// exactly when their memory is. Behind an unexported field (hidden), a
// string is not made canonical, so it is not flat.
func flat(typ reflect.Type, hidden bool) bool {
	if typ == objectMetaType {
		return false // its unique strings are not made canonical
	}
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

package decode

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"reflect"
	"sync"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fxkube/fxkube/internal/share"
)

// A Decoder decodes the protobuf encodings of one store's objects, of
// one type, into objects its table has taken. Safe for concurrent use.
type Decoder struct {
	mu    sync.Mutex
	table *share.Table
	root  *plan
	// managed is metadata's managedFields, left undecoded when the
	// store drops it; nil otherwise.
	managed *fieldPlan
	sums    *summer
	seed    maphash.Seed

	// index holds the canonical value decoded from each encoding seen in
	// two objects or more, by part and encoding.
	index map[int]map[string]entry
	// indexBytes estimates the heap index takes.
	indexBytes int64
	// seen is a direct-mapped filter of the encodings seen once, as
	// share.WireSplitter keeps: a field seen again is indexed.
	seen []uint32
	// records holds, by the hash of its namespace and name, what the
	// decoder knows of the last object it decoded under that name.
	records map[uint64]record
	// generation is the table's when the index was last cleared.
	generation int

	// Scratch of one decode, under mu.
	fields  []wireField
	pending []pending
	reused  map[unsafe.Pointer]share.Reused
	held    *record
	inMeta  bool // decoding the object's own metadata
	sums2   [maxSums]fieldSum
	nsums   int
}

// entry is an index's canonical value: a pointer, map or struct copy
// (p), or a slice (p, n); h is its hash in the table.
type entry struct {
	p unsafe.Pointer
	n int
	h uint64
}

// pending is a value decoded anew, indexed once its object is taken, if
// its encoding was seen before.
type pending struct {
	part int
	key  []byte
	at   unsafe.Pointer
	typ  reflect.Type
}

// record is what a decoder knows of an object it decoded: where it is,
// and the sums of the encodings of its top-level fields but metadata. An
// update whose field has the same sum takes the object's field.
type record struct {
	obj  unsafe.Pointer
	sums [maxSums]fieldSum
}

type fieldSum struct {
	num uint32
	sum [sumSize]byte
}

const (
	// maxSums is how many top-level fields a record sums: a Pod's spec
	// and status.
	maxSums = 2
	// minPart is the shortest encoding indexed: shorter values cost
	// about as much to look up as to decode.
	minPart = 24
	// seenSlots is the size of the filter of encodings seen: 64 KiB.
	seenSlots = 1 << 14
	// entryBytes estimates an index entry's heap besides its key: a map
	// slot of 48 bytes at three quarters full, and the string header.
	entryBytes = 80
	// recordBytes estimates a record's: its slot and the map's share.
	recordBytes = int64(unsafe.Sizeof(record{})+8) * 4 / 3
)

// An Option configures a Decoder.
type Option func(*Decoder)

// WithoutManagedFields leaves metadata.managedFields undecoded: for a
// store whose transform drops it.
func WithoutManagedFields() Option {
	return func(d *Decoder) {
		if meta := planOf(objectMetaType); meta != nil {
			for _, f := range meta.fields {
				if f != nil && f.name == "ManagedFields" {
					d.managed = f
				}
			}
		}
	}
}

// New returns a decoder of objects of example's type, a pointer to a
// generated message with metadata, which the table takes. It returns
// nil for any other type.
func New(example any, table *share.Table, opts ...Option) *Decoder {
	typ := reflect.TypeOf(example)
	if typ == nil || typ.Kind() != reflect.Pointer {
		return nil
	}
	root := planOf(typ.Elem())
	if root == nil || root.meta == nil {
		return nil
	}
	d := &Decoder{
		table: table, root: root, sums: newSummer(), seed: maphash.MakeSeed(),
		index:   map[int]map[string]entry{},
		records: map[uint64]record{}, reused: map[unsafe.Pointer]share.Reused{},
		generation: table.Generation(),
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Type returns the type of the objects d decodes: a pointer type.
func (d *Decoder) Type() reflect.Type { return reflect.PointerTo(d.root.typ) }

// Decode decodes b, the encoding of an object of d's type, into a new
// object, which d's table takes unless it has no name (a bookmark).
func (d *Decoder) Decode(b []byte) (any, error) {
	v := reflect.New(d.root.typ)
	obj := v.Interface()
	if err := d.DecodeInto(b, obj, v.UnsafePointer()); err != nil {
		return nil, err
	}
	return obj, nil
}

// DecodeInto decodes b into obj, a new zero object of d's type at p.
func (d *Decoder) DecodeInto(b []byte, obj any, p unsafe.Pointer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.decodeObject(b, obj, p)
}

// DecodeList decodes b, the encoding of a list of d's objects, into
// into, a pointer to a zero list of a generated type whose items are
// d's objects.
func (d *Decoder) DecodeList(b []byte, into any) error {
	lv := reflect.ValueOf(into)
	lp := planOf(lv.Type().Elem())
	var items *fieldPlan
	if lp != nil {
		for _, f := range lp.fields {
			if f != nil && f.name == "Items" && f.kind == list && f.elem == d.root.typ {
				items = f
			}
		}
	}
	if items == nil {
		return fmt.Errorf("%s is not a list of %s", lv.Type(), d.root.typ)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	start := len(d.fields)
	fs, ok := d.scan(lp, b)
	defer func() { d.fields = d.fields[:start] }()
	if !ok {
		return lp.unmarshal(lv.UnsafePointer(), b)
	}
	n := 0
	for _, f := range fs {
		if f.num == items.num {
			n++
		}
	}
	out := reflect.MakeSlice(items.typ, n, n)
	size := d.root.typ.Size()
	i, other := 0, -1
	for _, f := range fs {
		if f.num != items.num {
			if other < 0 {
				other = f.start
			}
			continue
		}
		if other >= 0 {
			if err := lp.unmarshal(lv.UnsafePointer(), b[other:f.start]); err != nil {
				return err
			}
			other = -1
		}
		p := unsafe.Add(out.UnsafePointer(), uintptr(i)*size)
		if err := d.decodeObject(b[f.value:f.end], reflect.NewAt(d.root.typ, p).Interface(), p); err != nil {
			return err
		}
		i++
	}
	if other >= 0 {
		if err := lp.unmarshal(lv.UnsafePointer(), b[other:]); err != nil {
			return err
		}
	}
	reflect.NewAt(items.typ, unsafe.Add(lv.UnsafePointer(), items.off)).Elem().Set(out)
	return nil
}

// decodeObject decodes one object; the caller holds d's lock.
func (d *Decoder) decodeObject(b []byte, obj any, p unsafe.Pointer) error {
	d.clearIfRebuilt()
	d.nsums, d.sums2 = 0, [maxSums]fieldSum{}
	// The scratch holds no object once done: a store that holds nothing
	// holds no part.
	defer func() {
		clear(d.pending)
		d.pending, d.held = d.pending[:0], nil
		clear(d.reused)
	}()
	if d.seen == nil {
		d.seen = make([]uint32, seenSlots)
	}
	if err := d.decodeMessage(d.root, b, p, true); err != nil {
		return err
	}
	meta := (*metav1.ObjectMeta)(unsafe.Add(p, d.root.meta.off))
	if meta.Name == "" {
		return nil
	}
	d.table.TakeReusing(obj, d.reused)
	d.index1()
	d.records[d.nameHash(meta)] = record{obj: p, sums: d.sums2}
	return nil
}

// Dropped tells d that its store dropped obj: it was deleted.
func (d *Decoder) Dropped(obj any) {
	v := reflect.ValueOf(obj)
	if v.Type() != d.Type() || v.IsNil() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	meta := (*metav1.ObjectMeta)(unsafe.Add(v.UnsafePointer(), d.root.meta.off))
	k := d.nameHash(meta)
	if r, ok := d.records[k]; ok && r.obj == v.UnsafePointer() {
		delete(d.records, k)
	}
	d.clearIfRebuilt()
}

// Bytes estimates the heap d holds besides the objects and their parts:
// its index and records.
func (d *Decoder) Bytes() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.indexBytes + int64(len(d.records))*recordBytes + int64(len(d.seen))*4
}

// clearIfRebuilt clears the index once the table has rebuilt: its
// values may be parts no object holds any more. Records of objects the
// table's owner no longer lists go too.
func (d *Decoder) clearIfRebuilt() {
	if g := d.table.Generation(); g != d.generation {
		d.generation = g
		d.clearIndex()
		if d.table.Listed() == 0 {
			// The store holds nothing: neither does the decoder.
			clear(d.records)
			d.seen = nil
		}
	}
}

func (d *Decoder) clearIndex() {
	clear(d.index)
	clear(d.seen)
	d.indexBytes = 0
}

func (d *Decoder) nameHash(m *metav1.ObjectMeta) uint64 {
	var h maphash.Hash
	h.SetSeed(d.seed)
	_, _ = h.WriteString(m.Namespace)
	_ = h.WriteByte('/')
	_, _ = h.WriteString(m.Name)
	return h.Sum64()
}

// decodeMessage decodes b, an encoding of pl's type, into the zero value
// at dst. top is set for the object itself.
//
// The fields decoded apart are each in one run of the encoding, and a
// message held once appears once: the generated code merges repeated
// messages, and decoding apart would not. Any other encoding, or one
// that does not parse, is decoded whole by the generated code, which
// then gives its own error.
func (d *Decoder) decodeMessage(pl *plan, b []byte, dst unsafe.Pointer, top bool) error {
	start := len(d.fields)
	fs, ok := d.scan(pl, b)
	defer func() { d.fields = d.fields[:start] }()
	if !ok {
		return pl.unmarshal(dst, b)
	}
	other := -1
	for i := 0; i < len(fs); {
		f := fs[i]
		fp := pl.field(f.num)
		if fp == nil {
			if other < 0 {
				other = f.start
			}
			i++
			continue
		}
		j := i + 1
		for j < len(fs) && fs[j].num == f.num {
			j++
		}
		if other >= 0 {
			if err := pl.unmarshal(dst, b[other:f.start]); err != nil {
				return err
			}
			other = -1
		}
		if err := d.decodeRun(pl, fp, b, fs[i:j], dst, top); err != nil {
			return err
		}
		i = j
	}
	if other >= 0 {
		return pl.unmarshal(dst, b[other:])
	}
	return nil
}

// decodeRun decodes the run of fields of fp in b into dst's field.
func (d *Decoder) decodeRun(pl *plan, fp *fieldPlan, b []byte, run []wireField, dst unsafe.Pointer, top bool) error {
	if fp == d.managed && d.inMeta {
		return nil
	}
	at := unsafe.Add(dst, fp.off)
	whole := b[run[0].start:run[len(run)-1].end]
	if top && fp != pl.meta {
		sum := d.sums.sum(whole)
		if d.nsums < maxSums {
			d.sums2[d.nsums] = fieldSum{num: uint32(fp.num), sum: sum}
			d.nsums++
		}
		if d.held != nil && d.held.has(fp.num, sum) {
			reflect.NewAt(fp.typ, at).Elem().Set(reflect.NewAt(fp.typ, unsafe.Add(d.held.obj, fp.off)).Elem())
			// The field's parts are the held object's, which readers may
			// hold: the table must not walk them again. Its hash mixes
			// only into the object's own, which no part holds.
			d.reused[at] = share.Reused{Type: fp.typ}
			return nil
		}
	}
	switch fp.kind {
	case message, pointer:
		value := b[run[0].value:run[0].end]
		typ := fp.elem
		if fp.kind == pointer {
			typ = fp.typ
		}
		if d.reuse(fp.part, value, at, typ) {
			return nil
		}
		target := at
		if fp.kind == pointer {
			target = reflect.New(fp.elem).UnsafePointer()
		}
		// The transform drops the object's managedFields, not those of
		// the objects it holds (templates).
		objectMeta := top && fp == pl.meta
		if objectMeta {
			d.inMeta = true
		}
		err := d.decodeValue(fp, value, target)
		if objectMeta {
			d.inMeta = false
		}
		if err != nil {
			return err
		}
		if fp.kind == pointer {
			*(*unsafe.Pointer)(at) = target
		}
		d.pend(fp.part, value, at, typ)
	case list:
		if d.reuse(fp.part, whole, at, fp.typ) {
			return nil
		}
		s := reflect.MakeSlice(fp.typ, len(run), len(run))
		data, size := s.UnsafePointer(), fp.elem.Size()
		for i, f := range run {
			value, elem := b[f.value:f.end], unsafe.Add(data, uintptr(i)*size)
			if d.reuse(fp.elemPart, value, elem, fp.elem) {
				continue
			}
			if err := d.decodeValue(fp, value, elem); err != nil {
				return err
			}
			d.pend(fp.elemPart, value, elem, fp.elem)
		}
		reflect.NewAt(fp.typ, at).Elem().Set(s)
		d.pend(fp.part, whole, at, fp.typ)
	case mapping:
		if d.reuse(fp.part, whole, at, fp.typ) {
			return nil
		}
		if err := pl.unmarshal(dst, whole); err != nil {
			return err
		}
		d.pend(fp.part, whole, at, fp.typ)
	}
	if top && fp == pl.meta {
		if r, ok := d.records[d.nameHash((*metav1.ObjectMeta)(at))]; ok {
			d.held = &r
		}
	}
	return nil
}

// decodeValue decodes a message of fp's element type into the zero
// value at p: field by field if it has a plan, else whole.
func (d *Decoder) decodeValue(fp *fieldPlan, b []byte, p unsafe.Pointer) error {
	if fp.sub != nil {
		return d.decodeMessage(fp.sub, b, p, false)
	}
	return reflect.NewAt(fp.elem, p).Interface().(unmarshaler).Unmarshal(b)
}

// reuse sets the value of type typ at p to the canonical value decoded
// from key, and reports whether the index holds one.
func (d *Decoder) reuse(part int, key []byte, p unsafe.Pointer, typ reflect.Type) bool {
	if len(key) < minPart {
		return false
	}
	e, ok := d.index[part][string(key)]
	if !ok {
		return false
	}
	switch typ.Kind() {
	case reflect.Struct:
		reflect.NewAt(typ, p).Elem().Set(reflect.NewAt(typ, e.p).Elem())
	case reflect.Slice:
		*(*sliceHeader)(p) = sliceHeader{e.p, e.n, e.n}
	default: // pointers and maps
		*(*unsafe.Pointer)(p) = e.p
	}
	d.reused[p] = share.Reused{Type: typ, Hash: e.h}
	return true
}

func (d *Decoder) pend(part int, key []byte, at unsafe.Pointer, typ reflect.Type) {
	if len(key) >= minPart {
		d.pending = append(d.pending, pending{part, key, at, typ})
	}
}

// index1 indexes the values the last decode made anew whose encodings
// were seen before, now that they are canonical. An index holding more
// than half of what the table holds is cleared first: it then holds
// mostly what churn left.
func (d *Decoder) index1() {
	if d.indexBytes > 1<<16 && 2*d.indexBytes > d.table.PartsBytes() {
		d.clearIndex()
	}
	for _, pe := range d.pending {
		if !d.seenBefore(pe.part, pe.key) {
			continue
		}
		idx := d.index[pe.part]
		if idx == nil {
			idx = map[string]entry{}
			d.index[pe.part] = idx
		}
		if _, ok := idx[string(pe.key)]; ok {
			continue
		}
		e := entry{h: d.table.PartHash(pe.typ, pe.at)}
		size := int64(len(pe.key)) + entryBytes
		switch pe.typ.Kind() {
		case reflect.Struct:
			c := reflect.New(pe.typ)
			c.Elem().Set(reflect.NewAt(pe.typ, pe.at).Elem())
			e.p = c.UnsafePointer()
			size += int64(pe.typ.Size())
		case reflect.Slice:
			h := (*sliceHeader)(pe.at)
			e.p, e.n = h.data, h.len
		default:
			e.p = *(*unsafe.Pointer)(pe.at)
		}
		idx[string(pe.key)] = e
		d.indexBytes += size
	}
}

// seenBefore reports whether the filter has seen key as part, and marks
// it seen.
func (d *Decoder) seenBefore(part int, key []byte) bool {
	h := maphash.Bytes(d.seed, key) ^ uint64(part)*0x9e3779b97f4a7c15
	slot, tag := &d.seen[h%seenSlots], uint32(h>>32)|1
	if *slot == tag {
		return true
	}
	*slot = tag
	return false
}

func (r *record) has(num uint64, sum [sumSize]byte) bool {
	for _, s := range r.sums {
		if uint64(s.num) == num {
			return s.sum == sum
		}
	}
	return false
}

// sliceHeader is how a slice lies in memory.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// wireField is one field of a message: b[start:end], its value from
// value, of number num and wire type wire.
type wireField struct {
	num               uint64
	wire              uint8
	start, value, end int
}

// scan appends the fields of b, a message of pl's type, to d.fields and
// returns them. It reports false if b does not parse, holds a group, or
// holds a field decoded apart outside one run, or a message held once
// more than once.
func (d *Decoder) scan(pl *plan, b []byte) ([]wireField, bool) {
	start := len(d.fields)
	var runs [maxPlanned / 64]uint64 // fields decoded apart whose run has ended
	last := uint64(0)
	for i := 0; i < len(b); {
		f := wireField{start: i}
		key, n := binary.Uvarint(b[i:])
		if n <= 0 || key>>3 == 0 || key>>3 > 1<<29-1 {
			return nil, false
		}
		i += n
		f.num, f.wire = key>>3, uint8(key&7)
		switch f.wire {
		case 0:
			_, n := binary.Uvarint(b[i:])
			if n <= 0 {
				return nil, false
			}
			f.value, i = i, i+n
		case 1:
			f.value, i = i, i+8
		case 5:
			f.value, i = i, i+4
		case 2:
			l, n := binary.Uvarint(b[i:])
			if n <= 0 || l > uint64(len(b)-i-n) {
				return nil, false
			}
			f.value, i = i+n, i+n+int(l)
		default:
			return nil, false
		}
		if i > len(b) {
			return nil, false
		}
		f.end = i
		if fp := pl.field(f.num); fp != nil {
			if f.wire != 2 {
				return nil, false
			}
			ended := runs[f.num/64]&(1<<(f.num%64)) != 0
			if ended || (f.num == last && fp.kind != list && fp.kind != mapping) {
				return nil, false
			}
		}
		if last != f.num && pl.field(last) != nil {
			runs[last/64] |= 1 << (last % 64)
		}
		last = f.num
		d.fields = append(d.fields, f)
	}
	return d.fields[start:], true
}

// String describes d for logs.
func (d *Decoder) String() string { return fmt.Sprintf("decode.Decoder(%s)", d.root.typ) }

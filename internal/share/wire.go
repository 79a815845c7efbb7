package share

import (
	"encoding/binary"
	"hash/maphash"
	"iter"
	"sync/atomic"
	"unique"
	"unsafe"
)

// A Wire is a protobuf encoding held in parts. A field that other
// encodings repeat is mostly held once per process, as a [unique.Handle];
// the rest is held inline. Its bytes, in order, are the encoding's.
//
// A shared part is released once no Wire holds it: unique's canonical
// copies are weakly held.
type Wire struct {
	inline []byte
	parts  []wirePart
	n      int // the encoding's length
}

// wirePart is a shared field, placed before inline[at:].
type wirePart struct {
	at    int
	field unique.Handle[string]
}

// Whole returns raw held whole, inline: an encoding that is not protobuf.
func Whole(raw []byte) Wire { return Wire{inline: raw, n: len(raw)} }

// WireFieldBytes estimates the heap a shared field takes: its bytes, and
// the canonical copy's entry in unique's table.
func WireFieldBytes(f unique.Handle[string]) int64 { return int64(len(f.Value())) + uniqueEntryBytes }

// uniqueEntryBytes is about what unique's table takes per value besides
// the value, in Go 1.26: its entry, box, weak handle, cleanup and trie
// nodes. The runtime's records of the weak pointer come on top.
const uniqueEntryBytes = 112

// Len returns the length of w's encoding.
func (w Wire) Len() int { return w.n }

// AppendTo appends w's encoding to dst.
func (w Wire) AppendTo(dst []byte) []byte {
	prev := 0
	for _, p := range w.parts {
		dst = append(dst, w.inline[prev:p.at]...)
		dst = append(dst, p.field.Value()...)
		prev = p.at
	}
	return append(dst, w.inline[prev:]...)
}

// InlineBytes returns the heap w holds of its own: its inline bytes and
// its references to shared parts.
func (w Wire) InlineBytes() int64 {
	return int64(cap(w.inline)) + int64(cap(w.parts))*int64(unsafe.Sizeof(wirePart{}))
}

// Shared returns w's shared parts.
func (w Wire) Shared() iter.Seq[unique.Handle[string]] {
	return func(yield func(unique.Handle[string]) bool) {
		for _, p := range w.parts {
			if !yield(p.field) {
				return
			}
		}
	}
}

// A WireSplitter splits protobuf encodings into Wires. A field of
// minSharedField bytes or more is shared if the encoding it replaces
// shares it, or if the splitter has seen it in another encoding. Any
// other such field that parses as a message is split in turn, in case
// its own fields repeat. Safe for concurrent use.
//
// The first encoding to hold a field keeps it inline. Each level hashes
// its fields whole, so a split costs the encoding's size times its depth.
type WireSplitter struct {
	seed maphash.Seed
	// seen holds a tag of each field seen, by hash: a direct-mapped
	// filter, so that it takes fixed memory. A field whose slot another
	// took is seen anew; one whose tag a different field shares is
	// shared early, no harm done.
	seen []atomic.Uint32
}

const (
	// minSharedField is the shortest field shared. A reference takes 16
	// bytes, and a canonical copy about 112 more: held by 10 encodings, a
	// field of 32 bytes saves a little.
	minSharedField = 32
	// seenSlots is the size of a splitter's filter: 64 KiB.
	seenSlots = 1 << 14
)

// NewWireSplitter returns a splitter that has seen nothing.
func NewWireSplitter() *WireSplitter {
	return &WireSplitter{seed: maphash.MakeSeed(), seen: make([]atomic.Uint32, seenSlots)}
}

// Split returns raw held in parts. It shares the fields old holds first,
// if old is the encoding raw replaces. If raw is not a protobuf message,
// it is held inline, whole. Split keeps no reference to raw.
func (s *WireSplitter) Split(raw []byte, old *Wire) Wire {
	if !isMessage(raw) {
		return Wire{inline: clone(raw), n: len(raw)}
	}
	b := &wireBuilder{s: s}
	if old != nil {
		b.old = make(map[string]unique.Handle[string], len(old.parts))
		for _, p := range old.parts {
			b.old[p.field.Value()] = p.field
		}
		b.oldFields = make(map[uint64]struct{})
		s.fieldsOf(old.AppendTo(make([]byte, 0, old.n)), b.oldFields)
	}
	b.split(raw)
	w := Wire{inline: clone(b.inline), n: len(raw)}
	if len(b.parts) > 0 {
		w.parts = append([]wirePart(nil), b.parts...)
	}
	return w
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// seenBefore reports whether the splitter has seen the field of hash h,
// and marks it seen.
func (s *WireSplitter) seenBefore(h uint64) bool {
	slot, tag := &s.seen[h%seenSlots], uint32(h>>32)|1
	if slot.Load() == tag {
		return true
	}
	slot.Store(tag)
	return false
}

// fieldsOf adds the hashes of msg's fields that split would look up, at
// every depth, to hashes.
func (s *WireSplitter) fieldsOf(msg []byte, hashes map[uint64]struct{}) {
	if !isMessage(msg) {
		return
	}
	for f := range fields(msg) {
		if f.delimited && f.end-f.start >= minSharedField {
			hashes[maphash.Bytes(s.seed, msg[f.start:f.end])] = struct{}{}
			s.fieldsOf(msg[f.value:f.end], hashes)
		}
	}
}

type wireBuilder struct {
	s *WireSplitter
	// old are the shared fields of the encoding this one replaces, and
	// oldFields the hashes of all its fields: what it held itself is no
	// sign that another encoding holds it too.
	old       map[string]unique.Handle[string]
	oldFields map[uint64]struct{}
	inline    []byte
	parts     []wirePart
}

// split adds the fields of msg, a valid message.
func (b *wireBuilder) split(msg []byte) {
	for f := range fields(msg) {
		field := msg[f.start:f.end]
		if !f.delimited || len(field) < minSharedField {
			b.inline = append(b.inline, field...)
			continue
		}
		if h, ok := b.old[string(field)]; ok {
			b.share(h)
			continue
		}
		h := maphash.Bytes(b.s.seed, field)
		if _, held := b.oldFields[h]; !held && b.s.seenBefore(h) {
			b.share(unique.Make(string(field)))
			continue
		}
		if isMessage(msg[f.value:f.end]) {
			b.inline = append(b.inline, msg[f.start:f.value]...)
			b.split(msg[f.value:f.end])
			continue
		}
		b.inline = append(b.inline, field...)
	}
}

func (b *wireBuilder) share(h unique.Handle[string]) {
	b.parts = append(b.parts, wirePart{at: len(b.inline), field: h})
}

// wireField is one field of a message: msg[start:end], its value from
// value. A delimited field's value is a length's worth of bytes: a
// string, bytes or a message.
type wireField struct {
	start, value, end int
	delimited         bool
}

// fields returns the fields of msg, which isMessage accepted.
func fields(msg []byte) iter.Seq[wireField] {
	return func(yield func(wireField) bool) {
		for i := 0; i < len(msg); {
			f := wireField{start: i}
			key, n := binary.Uvarint(msg[i:])
			i += n
			if f.delimited = key&7 == 2; f.delimited {
				l, n := binary.Uvarint(msg[i:])
				i += n
				f.value, i = i, i+int(l)
			} else {
				f.value = i
				i += fixedLen(key&7, msg[i:])
			}
			f.end = i
			if !yield(f) {
				return
			}
		}
	}
}

// fixedLen returns the length of the value of a field of wire type wt
// that is not length-delimited, at the start of b.
func fixedLen(wt uint64, b []byte) int {
	switch wt {
	case 0:
		_, n := binary.Uvarint(b)
		return n
	case 1:
		return 8
	default: // 5
		return 4
	}
}

// isMessage reports whether b parses as protobuf fields. A string may
// parse too: splitting it is harmless, as a Wire's bytes are the
// encoding's whatever its parts.
func isMessage(b []byte) bool {
	for i := 0; i < len(b); {
		key, n := binary.Uvarint(b[i:])
		if n <= 0 || key>>3 == 0 {
			return false
		}
		i += n
		switch key & 7 {
		case 0:
			_, n := binary.Uvarint(b[i:])
			if n <= 0 {
				return false
			}
			i += n
		case 1:
			i += 8
		case 5:
			i += 4
		case 2:
			l, n := binary.Uvarint(b[i:])
			if n <= 0 || l > uint64(len(b)-i-n) {
				return false
			}
			i += n + int(l)
		default:
			return false
		}
		if i > len(b) {
			return false
		}
	}
	return true
}

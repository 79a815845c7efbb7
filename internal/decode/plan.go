package decode

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A plan is what a decoder knows of a generated message type, learnt
// once from its protobuf struct tags: where each field that holds a
// message, a list of messages or a map lies.
type plan struct {
	typ reflect.Type
	// fields are the fields decoded apart, indexed by field number; nil
	// for the others. Use field.
	fields []*fieldPlan
	// unmarshal decodes an encoding of the type into the value at p with
	// the generated code, merging into what is there.
	unmarshal func(p unsafe.Pointer, b []byte) error
	// meta is the object's metadata field, if it is an object.
	meta *fieldPlan
}

// A fieldKind is how a decoder decodes a field apart.
type fieldKind uint8

const (
	// message is a message held by value.
	message fieldKind = iota
	// pointer is a message held through a pointer.
	pointer
	// list is a repeated message held as a slice of values.
	list
	// mapping is a map, decoded by the generated code of its message.
	mapping
)

// A fieldPlan is one field decoded apart.
type fieldPlan struct {
	num  uint64
	name string
	off  uintptr
	kind fieldKind
	// typ is the field's type; elem the message's (the pointer's or
	// slice's element). sub is elem's plan, nil for a message the
	// generated code alone decodes (times, quantities).
	typ, elem reflect.Type
	sub       *plan
	// part names the field's value in a decoder's index: a list's
	// encodings (all its entries) and an element's are told apart.
	part, elemPart int
}

// unmarshaler is what generated message types implement.
type unmarshaler interface{ Unmarshal([]byte) error }

var (
	plans = struct {
		sync.Mutex
		byType map[reflect.Type]*plan
		// parts counts the part numbers given out.
		parts int
	}{byType: map[reflect.Type]*plan{}}
	typeMetaType   = reflect.TypeFor[metav1.TypeMeta]()
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
	unmarshalerT   = reflect.TypeFor[unmarshaler]()
)

// planOf returns typ's plan, or nil if typ is not a generated message
// whose fields a decoder can decode apart.
func planOf(typ reflect.Type) *plan {
	plans.Lock()
	defer plans.Unlock()
	return learn(typ)
}

// learn returns typ's plan, learning it the first time. The caller holds
// plans' lock.
func learn(typ reflect.Type) *plan {
	if p, ok := plans.byType[typ]; ok {
		return p
	}
	if !planned(typ) {
		plans.byType[typ] = nil
		return nil
	}
	p := &plan{typ: typ, unmarshal: unmarshalFunc(typ)}
	// Held before its fields are learnt: a type may reach itself.
	plans.byType[typ] = p
	for i := range typ.NumField() {
		f := typ.Field(i)
		wire, num, ok := protobufTag(f)
		if !ok || wire != "bytes" {
			continue
		}
		fp := &fieldPlan{num: num, name: f.Name, off: f.Offset, typ: f.Type}
		switch {
		case f.Type.Kind() == reflect.Struct:
			fp.kind, fp.elem = message, f.Type
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct:
			fp.kind, fp.elem = pointer, f.Type.Elem()
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			fp.kind, fp.elem = list, f.Type.Elem()
		case f.Type.Kind() == reflect.Map:
			fp.kind = mapping
		default:
			continue // strings, bytes, lists of strings: left to the generated code
		}
		if fp.elem != nil {
			if !reflect.PointerTo(fp.elem).Implements(unmarshalerT) {
				continue
			}
			fp.sub = learn(fp.elem)
		}
		fp.part = newPart()
		if fp.kind == list {
			fp.elemPart = newPart()
		}
		if num >= maxPlanned {
			// Decoded apart, it would be decoded whole: see scan.
			continue
		}
		if num >= uint64(len(p.fields)) {
			p.fields = append(p.fields, make([]*fieldPlan, int(num)+1-len(p.fields))...)
		}
		p.fields[num] = fp
		if f.Type == objectMetaType {
			p.meta = fp
		}
	}
	return p
}

// maxPlanned bounds the numbers of the fields decoded apart; scan's
// record of runs holds those below it.
const maxPlanned = 256

// field returns the plan of the field numbered num, or nil if it is not
// decoded apart.
func (p *plan) field(num uint64) *fieldPlan {
	if num < uint64(len(p.fields)) {
		return p.fields[num]
	}
	return nil
}

func newPart() int {
	plans.parts++
	return plans.parts
}

// planned reports whether typ is a generated message whose every field
// is in its encoding: the generated code then decodes each field alone
// as it does within the whole.
func planned(typ reflect.Type) bool {
	if typ.Kind() != reflect.Struct || !reflect.PointerTo(typ).Implements(unmarshalerT) {
		return false
	}
	tagged := 0
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type == typeMetaType && f.Anonymous {
			continue // not in the encoding: set from the envelope
		}
		if !f.IsExported() {
			return false
		}
		if _, _, ok := protobufTag(f); !ok {
			return false
		}
		tagged++
	}
	return tagged > 0
}

// protobufTag returns a field's wire type name and number, from a tag
// such as `protobuf:"bytes,2,opt,name=spec"`.
func protobufTag(f reflect.StructField) (wire string, num uint64, ok bool) {
	tag, found := f.Tag.Lookup("protobuf")
	if !found || tag == "-" {
		return "", 0, false
	}
	parts := strings.Split(tag, ",")
	if len(parts) < 2 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(parts[1], 10, 32)
	if err != nil || n == 0 {
		return "", 0, false
	}
	return parts[0], n, true
}

// unmarshalFunc returns a function running typ's generated Unmarshal on
// the value at a pointer.
func unmarshalFunc(typ reflect.Type) func(p unsafe.Pointer, b []byte) error {
	return func(p unsafe.Pointer, b []byte) error {
		return reflect.NewAt(typ, p).Interface().(unmarshaler).Unmarshal(b)
	}
}

package decode

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"slices"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// A Serializer is a REST client's negotiated serializer whose protobuf
// decoder decodes a kind's objects and lists through a Decoder, once one
// is set. What else it decodes, it leaves to the serializer it wraps:
// error statuses, other kinds, JSON.
//
// It decodes as client-go's REST clients of typed objects do: without
// conversion, and with the kind of what it decodes cleared. A decoder's
// objects are shared from the moment it takes them, so nothing writes
// their kind after that: they are decoded with it cleared already.
//
// A REST client decodes a list's body, and each object of a watch event
// (a streamed list's among them), with its serializer's protobuf
// decoder. A watch event's frame is decoded by the stream serializer,
// which only copies the object's bytes: it is left as it is.
type Serializer struct {
	runtime.NegotiatedSerializer
	gvk, listGVK schema.GroupVersionKind
	apiVersion   string
	decoder      atomic.Pointer[Decoder]
}

// NewSerializer returns a serializer of scheme's types that decodes
// objects of kind gvk, and lists of them, through the decoder set with
// Use.
func NewSerializer(scheme *runtime.Scheme, gvk schema.GroupVersionKind) *Serializer {
	ns := serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}
	return &Serializer{NegotiatedSerializer: ns, gvk: gvk, listGVK: gvk.GroupVersion().WithKind(gvk.Kind + "List"),
		apiVersion: gvk.GroupVersion().String()}
}

// Use makes s decode through d from now on; nil decodes as the wrapped
// serializer does.
func (s *Serializer) Use(d *Decoder) { s.decoder.Store(d) }

// SupportedMediaTypes implements runtime.NegotiatedSerializer.
func (s *Serializer) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := slices.Clone(s.NegotiatedSerializer.SupportedMediaTypes())
	for i := range infos {
		if infos[i].MediaType == runtime.ContentTypeProtobuf {
			infos[i].Serializer = protobufDecoder{Serializer: infos[i].Serializer, s: s}
		}
	}
	return infos
}

// DecoderToVersion implements runtime.NegotiatedSerializer. The wrapped
// serializer's decoder clears the kind of an object after decoding it;
// the protobuf decoder clears it before its decoder takes the object.
func (s *Serializer) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	p, ok := d.(protobufDecoder)
	if !ok {
		return s.NegotiatedSerializer.DecoderToVersion(d, gv)
	}
	p.wrapped = s.NegotiatedSerializer.DecoderToVersion(p.Serializer, gv)
	return p
}

// protobufDecoder decodes what its serializer's decoder can, and leaves
// the rest to the protobuf serializer, as wrapped decodes it.
type protobufDecoder struct {
	runtime.Serializer
	s *Serializer
	// wrapped decodes as the wrapped serializer's decoder to a version;
	// nil before DecoderToVersion.
	wrapped runtime.Decoder
}

// Decode implements runtime.Decoder as apimachinery's protobuf
// serializer does, into reset first, and then clears the kind of what
// it decodes.
func (p protobufDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	d := p.s.decoder.Load()
	if d == nil {
		return p.fallback(data, defaults, into)
	}
	apiVersion, kind, raw, ok := envelope(data)
	if !ok || string(apiVersion) != p.s.apiVersion {
		return p.fallback(data, defaults, into)
	}
	switch {
	case string(kind) == p.s.gvk.Kind && (into == nil || reflect.TypeOf(into) == d.Type()):
		gvk := p.s.gvk
		v := reflect.ValueOf(into)
		if into == nil {
			v = reflect.New(d.root.typ)
		} else {
			v.Elem().SetZero()
		}
		obj := v.Interface().(runtime.Object)
		if err := d.DecodeInto(raw, obj, v.UnsafePointer()); err != nil {
			return nil, &gvk, err
		}
		return obj, &gvk, nil
	case string(kind) == p.s.listGVK.Kind && into != nil && reflect.TypeOf(into).Kind() == reflect.Pointer:
		gvk := p.s.listGVK
		v := reflect.ValueOf(into)
		v.Elem().SetZero()
		if err := d.DecodeList(raw, into); err != nil {
			return nil, &gvk, err
		}
		return into, &gvk, nil
	}
	return p.fallback(data, defaults, into)
}

// fallback decodes data as the wrapped serializer would.
func (p protobufDecoder) fallback(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if p.wrapped != nil {
		return p.wrapped.Decode(data, defaults, into)
	}
	return p.Serializer.Decode(data, defaults, into)
}

// protobufPrefix starts each protobuf encoding of a Kubernetes object:
// "k8s" and a zero byte.
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

// envelope returns the apiVersion, kind and object's encoding in data,
// a runtime.Unknown after protobufPrefix, if it is one whose object is
// protobuf, in no content encoding, each field once. All three are
// slices of data.
func envelope(data []byte) (apiVersion, kind, raw []byte, ok bool) {
	b, found := bytes.CutPrefix(data, protobufPrefix)
	if !found {
		return nil, nil, nil, false
	}
	var seen [5]bool
	for i := 0; i < len(b); {
		key, n := binary.Uvarint(b[i:])
		if n <= 0 || key&7 != 2 || key>>3 == 0 || key>>3 > 4 || seen[key>>3] {
			return nil, nil, nil, false
		}
		seen[key>>3] = true
		i += n
		l, n := binary.Uvarint(b[i:])
		if n <= 0 || l > uint64(len(b)-i-n) {
			return nil, nil, nil, false
		}
		v := b[i+n : i+n+int(l)]
		i += n + int(l)
		switch key >> 3 {
		case 1: // typeMeta
			if apiVersion, kind, ok = typeMeta(v); !ok {
				return nil, nil, nil, false
			}
		case 2: // raw
			raw = v
		default: // contentEncoding, contentType
			if len(v) > 0 {
				return nil, nil, nil, false
			}
		}
	}
	if !seen[2] || len(kind) == 0 || len(apiVersion) == 0 {
		return nil, nil, nil, false
	}
	return apiVersion, kind, raw, true
}

// typeMeta returns the fields of a runtime.TypeMeta's encoding, if it
// holds only them, once each.
func typeMeta(b []byte) (apiVersion, kind []byte, ok bool) {
	for i := 0; i < len(b); {
		key, n := binary.Uvarint(b[i:])
		if n <= 0 || key&7 != 2 {
			return nil, nil, false
		}
		i += n
		l, n := binary.Uvarint(b[i:])
		if n <= 0 || l > uint64(len(b)-i-n) {
			return nil, nil, false
		}
		v := b[i+n : i+n+int(l)]
		i += n + int(l)
		switch {
		case key>>3 == 1 && apiVersion == nil:
			apiVersion = v
		case key>>3 == 2 && kind == nil:
			kind = v
		default:
			return nil, nil, false
		}
	}
	return apiVersion, kind, true
}

// A Target is what a store lists and watches through, if it can decode
// through a Decoder, such as internal/listwatch's Decoding.
type Target interface {
	// DecodeWith makes the target decode through d, from the next list
	// or watch on.
	DecodeWith(d *Decoder)
}

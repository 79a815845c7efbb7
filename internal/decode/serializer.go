package decode

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"slices"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
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
// decoder. A watch event's frame is decoded by the stream serializer:
// see [eventDecoder] for why it no longer copies the object's bytes.
type Serializer struct {
	runtime.NegotiatedSerializer
	gvk, listGVK schema.GroupVersionKind
	apiVersion   string
	decoder      atomic.Pointer[Decoder]
	// eventKind is the kind the scheme gives a watch event; nil if it has
	// none.
	eventKind *schema.GroupVersionKind
}

// NewSerializer returns a serializer of scheme's types that decodes
// objects of kind gvk, and lists of them, through the decoder set with
// Use.
func NewSerializer(scheme *runtime.Scheme, gvk schema.GroupVersionKind) *Serializer {
	ns := serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}
	s := &Serializer{NegotiatedSerializer: ns, gvk: gvk, listGVK: gvk.GroupVersion().WithKind(gvk.Kind + "List"),
		apiVersion: gvk.GroupVersion().String()}
	if kinds, _, err := scheme.ObjectKinds(&metav1.WatchEvent{}); err == nil {
		s.eventKind = &kinds[0]
	}
	return s
}

// Use makes s decode through d from now on; nil decodes as the wrapped
// serializer does.
func (s *Serializer) Use(d *Decoder) { s.decoder.Store(d) }

// SupportedMediaTypes implements runtime.NegotiatedSerializer.
func (s *Serializer) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := slices.Clone(s.NegotiatedSerializer.SupportedMediaTypes())
	for i := range infos {
		if infos[i].MediaType != runtime.ContentTypeProtobuf {
			continue
		}
		infos[i].Serializer = protobufDecoder{Serializer: infos[i].Serializer, s: s}
		if stream := infos[i].StreamSerializer; stream != nil && s.eventKind != nil {
			events := *stream
			events.Serializer = eventDecoder{events.Serializer, *s.eventKind}
			infos[i].StreamSerializer = &events
		}
	}
	return infos
}

// eventDecoder decodes a watch event's frame as the protobuf stream
// serializer does, but leaves the event's object in the frame instead
// of copying it.
//
// client-go's watch decoder (k8s.io/client-go/rest/watch) decodes each
// frame into an event of its own, decodes the event's object at once,
// and drops the event; the frame's buffer is read into again only for
// the next frame. Objects are decoded with the generated code or a
// Decoder, which copy every byte they keep. So the copy only made
// garbage: 37% of what a store of 10,000 Pods allocated until synced.
//
// Only an encoding with each field once, and nothing else, is decoded
// so; any other is left to the stream serializer.
type eventDecoder struct {
	runtime.Serializer
	kind schema.GroupVersionKind // of a watch event, in the scheme
}

// Decode implements runtime.Decoder.
func (e eventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if event, ok := into.(*metav1.WatchEvent); ok {
		if typ, raw, ok := watchEvent(data); ok {
			*event = metav1.WatchEvent{Type: eventType(typ), Object: runtime.RawExtension{Raw: raw}}
			kind := e.kind
			return event, &kind, nil
		}
	}
	return e.Serializer.Decode(data, defaults, into)
}

// watchEvent returns the type and the object's bytes of b, a
// metav1.WatchEvent's encoding, if it holds its type and an object with
// raw bytes, each once, and nothing else. raw is a slice of b.
func watchEvent(b []byte) (typ, raw []byte, ok bool) {
	var event, object [2][]byte // type, object; raw
	if !lengthDelimited(b, event[:]) || event[0] == nil || event[1] == nil ||
		!lengthDelimited(event[1], object[:1]) || object[0] == nil {
		return nil, nil, false
	}
	return event[0], object[0], true
}

// lengthDelimited sets values[i] to the value of b's field i+1, each
// length-delimited; a field absent is left nil. It reports false if b
// holds any other field, a field twice, or does not parse.
func lengthDelimited(b []byte, values [][]byte) bool {
	for i := 0; i < len(b); {
		key, k := binary.Uvarint(b[i:])
		num := key >> 3
		if k <= 0 || key&7 != 2 || num == 0 || num > uint64(len(values)) || values[num-1] != nil {
			return false
		}
		i += k
		l, k := binary.Uvarint(b[i:])
		if k <= 0 || l > uint64(len(b)-i-k) {
			return false
		}
		values[num-1] = b[i+k : i+k+int(l)]
		i += k + int(l)
	}
	return true
}

// eventType returns b as a string, without allocating for the types a
// watch sends.
func eventType(b []byte) string {
	for _, t := range [...]watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error} {
		if string(b) == string(t) {
			return string(t)
		}
	}
	return string(b)
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
	// typeMeta, raw, contentEncoding, contentType
	var unknown, typeMeta [4][]byte
	if !lengthDelimited(b, unknown[:]) || unknown[1] == nil || len(unknown[2]) > 0 || len(unknown[3]) > 0 {
		return nil, nil, nil, false
	}
	// apiVersion, kind
	if !lengthDelimited(unknown[0], typeMeta[:2]) || len(typeMeta[0]) == 0 || len(typeMeta[1]) == 0 {
		return nil, nil, nil, false
	}
	return typeMeta[0], typeMeta[1], unknown[1], true
}

// A Target is what a store lists and watches through, if it can decode
// through a Decoder, such as internal/listwatch's Decoding.
type Target interface {
	// DecodeWith makes the target decode through d, from the next list
	// or watch on.
	DecodeWith(d *Decoder)
}

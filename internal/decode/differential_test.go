package decode

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/fxkube/fxkube/internal/share"
)

// marshaler is what generated message types implement.
type marshaler interface{ Marshal() ([]byte, error) }

// Random objects of every kind client-go's scheme serves as protobuf
// decode as the generated code decodes them, managedFields dropped; so
// do updates of them, each a copy with one top-level field filled anew.
func TestDecodeEveryKindAsGenerated(t *testing.T) {
	scheme := clientgoscheme.Scheme
	f := objectFuzzer()
	kinds := 0
	for gvk, typ := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		example := reflect.New(typ).Interface()
		if _, ok := example.(marshaler); !ok {
			continue
		}
		if New(example, share.New(cache.NewStore(cache.MetaNamespaceKeyFunc))) == nil {
			continue // no metadata: options, events
		}
		s := newStore(t, example, WithoutManagedFields())
		kinds++
		t.Run(gvk.String(), func(t *testing.T) {
			var last reflect.Value
			for i := range 20 {
				obj := reflect.New(typ)
				if i%2 == 1 {
					// An update: the last object, one top-level field filled anew.
					obj.Elem().Set(last.Elem())
					field := obj.Elem().Field(1 + i/2%(typ.NumField()-1))
					field.SetZero()
					f.Fill(field.Addr().Interface())
				} else {
					f.Fill(obj.Interface())
				}
				last = obj
				raw := encodeNamed(t, obj, "obj")
				want := reflect.New(typ)
				require.NoError(t, want.Interface().(unmarshaler).Unmarshal(raw))
				want.Elem().FieldByName("ObjectMeta").FieldByName("ManagedFields").SetZero()
				got := s.hold(t, raw)
				requireSame(t, want.Interface(), got, "object %d", i)
			}
		})
	}
	require.Greater(t, kinds, 50, "kinds decoded")
}

// objectFuzzer is apimachinery's round-trip fuzzer of client-go's types,
// seeded alike in every run.
func objectFuzzer() interface{ Fill(obj any) } {
	return fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(35), serializer.NewCodecFactory(clientgoscheme.Scheme))
}

// encodeNamed names obj, a pointer to a generated object, ns/name and
// returns its encoding.
func encodeNamed(t testing.TB, obj reflect.Value, name string) []byte {
	meta := obj.Elem().FieldByName("ObjectMeta").Addr().Interface().(*metav1.ObjectMeta)
	meta.Name, meta.Namespace = name, "ns"
	return marshal(t, obj.Interface().(marshaler))
}

// requireSame requires a and b deep-equal, with each quantity's
// canonical form cached, as a table leaves them.
func requireSame(t *testing.T, a, b any, msgAndArgs ...any) {
	t.Helper()
	cacheQuantities(reflect.ValueOf(a))
	cacheQuantities(reflect.ValueOf(b))
	require.True(t, reflect.DeepEqual(a, b), msgAndArgs...)
}

var quantityType = reflect.TypeFor[resource.Quantity]()

func cacheQuantities(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			cacheQuantities(v.Elem())
		}
	case reflect.Struct:
		if v.Type() == quantityType {
			if v.CanAddr() {
				_ = v.Addr().Interface().(*resource.Quantity).String()
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				cacheQuantities(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			cacheQuantities(v.Index(i))
		}
	case reflect.Map:
		if v.Type().Elem() == quantityType {
			for it := v.MapRange(); it.Next(); {
				q := it.Value().Interface().(resource.Quantity)
				_ = q.String()
				v.SetMapIndex(it.Key(), reflect.ValueOf(q))
			}
			return
		}
		for it := v.MapRange(); it.Next(); {
			cacheQuantities(it.Value())
		}
	}
}

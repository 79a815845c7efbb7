package decode

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/fxkube/fxkube/internal/share"
	"github.com/fxkube/fxkube/internal/workload"
)

// BenchmarkDecode decodes the 10,000 Pods of 100 Deployments, with
// managedFields, into a store that strips them: with the generated code
// and a table (as an informer with sharing does), and with a Decoder. It
// then decodes an update of each: an annotation changed (update), or
// the status as a container restarts (status); the resource version
// changes in both.
//
//	go test -run '^$' -bench Decode -benchmem ./internal/decode
func BenchmarkDecode(b *testing.B) {
	var raws [][]byte
	updates := map[string][][]byte{}
	for r := range 100 {
		for d := range 100 {
			pod := withManagedFields(workload.Pod(workload.Deployment("shop", d, 100), r))
			raws = append(raws, marshal(b, pod))
			restarted := pod.DeepCopy()
			pod.ResourceVersion += "1"
			pod.Annotations["bench.fxkube.io/version"] = "2"
			updates["update"] = append(updates["update"], marshal(b, pod))
			restarted.ResourceVersion += "1"
			workload.Restart(&restarted.Status, 1)
			updates["status"] = append(updates["status"], marshal(b, restarted))
		}
	}
	benchDecode(b, &corev1.Pod{}, raws, updates)
}

// BenchmarkDecodeConfigMaps decodes 10,000 ConfigMaps that repeat
// little, as BenchmarkPods' suite of objects holds: two labels, one of
// two values, and a data key of their own. An update changes the
// version in their data.
func BenchmarkDecodeConfigMaps(b *testing.B) {
	var raws [][]byte
	updates := map[string][][]byte{}
	for i := range 10_000 {
		tier := []string{"front", "back"}[i%2]
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("obj-%05d", i), Namespace: fmt.Sprintf("ns-%d", i%10),
				ResourceVersion: "1", Labels: map[string]string{"app": "fxkube-bench", "tier": tier}},
			Data: map[string]string{"version": "1", "config.yaml": fmt.Sprintf("server:\n  port: %d\n  name: obj-%05d\n", 8000+i%1000, i)},
		}
		raws = append(raws, marshal(b, cm))
		cm.ResourceVersion, cm.Data["version"] = "2", "2"
		updates["update"] = append(updates["update"], marshal(b, cm))
	}
	benchDecode(b, &corev1.ConfigMap{}, raws, updates)
}

// benchDecode decodes raws, encodings of objects of example's type, into
// a store: the generated code and a table against a Decoder. Each phase
// of updates decodes them into a store that holds raws already.
func benchDecode(b *testing.B, example any, raws [][]byte, updates map[string][][]byte) {
	typ := reflect.TypeOf(example).Elem()
	generatedStore := func(b *testing.B) (cache.Store, func(raw []byte) any) {
		st := cache.NewStore(cache.MetaNamespaceKeyFunc)
		table := share.New(st)
		return st, func(raw []byte) any {
			obj := reflect.New(typ).Interface()
			if err := obj.(unmarshaler).Unmarshal(raw); err != nil {
				b.Fatal(err)
			}
			obj.(metav1.Object).SetManagedFields(nil)
			table.Take(obj)
			table.Held(obj)
			return obj
		}
	}
	decoderStore := func(b *testing.B) (cache.Store, func(raw []byte) any) {
		s := newStore(b, example, WithoutManagedFields())
		return s.Store, func(raw []byte) any {
			obj, err := s.decoder.Decode(raw)
			if err != nil {
				b.Fatal(err)
			}
			s.table.Held(obj)
			return obj
		}
	}
	phases := append([]string{"list"}, slices.Sorted(maps.Keys(updates))...)
	for _, sys := range []struct {
		name string
		make func(b *testing.B) (cache.Store, func(raw []byte) any)
	}{{"generated", generatedStore}, {"decoder", decoderStore}} {
		for _, phase := range phases {
			b.Run("phase="+phase+"/decode="+sys.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					st, decode := sys.make(b)
					in := raws
					if phase != "list" {
						for _, raw := range raws {
							_ = st.Add(decode(raw))
						}
						in = updates[phase]
					}
					b.StartTimer()
					for _, raw := range in {
						_ = st.Update(decode(raw))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(raws)), "ns/object")
			})
		}
	}
}

package decode

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/fxkube/fxkube/internal/share"
	"github.com/fxkube/fxkube/internal/workload"
)

// BenchmarkDecode decodes the 10,000 Pods of 100 Deployments, with
// managedFields, into a store that strips them: with the generated code
// and a table (as an informer with sharing does), and with a Decoder. It
// then decodes an update of each (an annotation and the resource
// version changed).
//
//	go test -run '^$' -bench Decode -benchmem ./internal/decode
func BenchmarkDecode(b *testing.B) {
	var raws, updates [][]byte
	for r := range 100 {
		for d := range 100 {
			pod := withManagedFields(workload.Pod(workload.Deployment("shop", d, 100), r))
			raws = append(raws, marshal(b, pod))
			pod.ResourceVersion += "1"
			pod.Annotations["bench.fxkube.io/version"] = "2"
			updates = append(updates, marshal(b, pod))
		}
	}
	generatedStore := func(b *testing.B) (cache.Store, func(raw []byte) any) {
		st := cache.NewStore(cache.MetaNamespaceKeyFunc)
		table := share.New(st)
		return st, func(raw []byte) any {
			pod := &corev1.Pod{}
			if err := pod.Unmarshal(raw); err != nil {
				b.Fatal(err)
			}
			pod.ManagedFields = nil
			table.Take(pod)
			table.Held(pod)
			return pod
		}
	}
	decoderStore := func(b *testing.B) (cache.Store, func(raw []byte) any) {
		s := newStore(b, &corev1.Pod{}, WithoutManagedFields())
		return s.Store, func(raw []byte) any {
			obj, err := s.decoder.Decode(raw)
			if err != nil {
				b.Fatal(err)
			}
			s.table.Held(obj)
			return obj
		}
	}
	for _, sys := range []struct {
		name string
		make func(b *testing.B) (cache.Store, func(raw []byte) any)
	}{{"generated", generatedStore}, {"decoder", decoderStore}} {
		for _, phase := range []string{"list", "update"} {
			b.Run("phase="+phase+"/decode="+sys.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					st, decode := sys.make(b)
					if phase == "update" {
						for _, raw := range raws {
							_ = st.Add(decode(raw))
						}
					}
					in := raws
					if phase == "update" {
						in = updates
					}
					b.StartTimer()
					for _, raw := range in {
						_ = st.Update(decode(raw))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(raws)), "ns/pod")
			})
		}
	}
}

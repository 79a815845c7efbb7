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
		for _, phase := range []string{"list", "update", "status"} {
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
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(raws)), "ns/pod")
			})
		}
	}
}

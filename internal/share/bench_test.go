package share

import (
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/fxkube/fxkube/internal/workload"
)

// BenchmarkPods holds the Pods of 100 Deployments, decoded from protobuf
// as an informer decodes them, and reports the heap each Pod takes, as
// decoded and once taken by a table, and the time Take takes per Pod.
// Beside each heap figure (-est) is what Size and Table.Bytes estimate.
//
//	go test -run '^$' -bench Pods -benchtime 1x ./internal/share
func BenchmarkPods(b *testing.B) {
	for _, replicas := range []int{10, 100} {
		var raw [][]byte
		for d := range 100 {
			dep := workload.Deployment("shop", d, int32(replicas))
			for r := range replicas {
				data, err := workload.Pod(dep, r).Marshal()
				if err != nil {
					b.Fatal(err)
				}
				raw = append(raw, data)
			}
		}
		decode := func() []*corev1.Pod {
			pods := make([]*corev1.Pod, len(raw))
			for i, data := range raw {
				pods[i] = &corev1.Pod{}
				if err := pods[i].Unmarshal(data); err != nil {
					b.Fatal(err)
				}
			}
			return pods
		}
		b.Run(map[int]string{10: "replicas=10", 100: "replicas=100"}[replicas], func(b *testing.B) {
			var took time.Duration
			for range b.N {
				base := heap()
				pods := decode()
				decoded := heap() - base
				runtime.KeepAlive(pods)

				base = heap()
				pods = decode()
				table := New(cache.NewStore(cache.MetaNamespaceKeyFunc))
				start := time.Now()
				for _, p := range pods {
					table.Take(p)
				}
				took += time.Since(start)
				// The objects taken: the table forgets them once its
				// owner holds them (Held), and there is no owner here.
				table.pool.taken = nil
				shared := heap() - base
				runtime.KeepAlive(pods)
				runtime.KeepAlive(table)
				var sized int64
				for _, p := range decode() {
					sized += Size(p)
				}
				b.ReportMetric(float64(sized)/float64(len(raw)), "B/pod-decoded-est")
				b.ReportMetric(float64(table.Bytes(len(pods)))/float64(len(raw)), "B/pod-shared-est")
				b.ReportMetric(float64(decoded)/float64(len(raw)), "B/pod-decoded")
				b.ReportMetric(float64(shared)/float64(len(raw)), "B/pod-shared")
				b.ReportMetric(float64(shared)/float64(decoded), "shared/decoded")
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N*len(raw)), "ns/take")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func heap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkTake reports the CPU and allocations of one Take of a Pod into
// a table that holds its Deployment's other replicas: a Pod added, and a
// Pod updated (its resource version and an annotation changed).
//
//	go test -run '^$' -bench Take -benchmem ./internal/share
func BenchmarkTake(b *testing.B) {
	const deployments, replicas = 10, 100
	encode := func(change func(*corev1.Pod)) [][]byte {
		var raw [][]byte
		for r := range replicas {
			for d := range deployments {
				pod := workload.Pod(workload.Deployment("shop", d, replicas), r)
				change(pod)
				data, err := pod.Marshal()
				if err != nil {
					b.Fatal(err)
				}
				raw = append(raw, data)
			}
		}
		return raw
	}
	decode := func(raw [][]byte) []*corev1.Pod {
		pods := make([]*corev1.Pod, len(raw))
		for i, data := range raw {
			pods[i] = &corev1.Pod{}
			if err := pods[i].Unmarshal(data); err != nil {
				b.Fatal(err)
			}
		}
		return pods
	}
	added := encode(func(*corev1.Pod) {})
	updated := encode(func(p *corev1.Pod) {
		p.ResourceVersion += "1"
		p.Annotations = map[string]string{"example.com/touched": "yes"}
	})
	for _, bc := range []struct {
		name string
		// held are the Pods held before the benchmark takes raw's.
		held, raw [][]byte
	}{
		{"add", added[:deployments], added},
		{"update", added, updated},
	} {
		b.Run(bc.name, func(b *testing.B) {
			store := cache.NewStore(cache.MetaNamespaceKeyFunc)
			table := New(store)
			for _, p := range decode(bc.held) {
				table.Take(p)
				if err := store.Add(p); err != nil {
					b.Fatal(err)
				}
			}
			pods := decode(bc.raw)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%len(pods) == 0 && i > 0 {
					b.StopTimer()
					pods = decode(bc.raw)
					table.pool.taken = map[any]takenBy{}
					b.StartTimer()
				}
				table.Take(pods[i%len(pods)])
			}
		})
	}
}

package share

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"unique"
	"unsafe"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/fxkube/fxkube/internal/workload"
)

func marshal(t testing.TB, pod *corev1.Pod) []byte {
	raw, err := pod.Marshal()
	require.NoError(t, err)
	return raw
}

// A Wire's bytes are the encoding's, whatever it is given.
func FuzzWireSplit(f *testing.F) {
	pod := marshal(f, workload.Pod(workload.Deployment("shop", 1, 2), 0))
	for _, seed := range [][]byte{nil, {0}, {0x0a, 0x05, 'h', 'e', 'l', 'l', 'o'}, pod, pod[:len(pod)/2], append(pod[:len(pod):len(pod)], 0xff)} {
		f.Add(seed)
	}
	s := NewWireSplitter()
	f.Fuzz(func(t *testing.T, raw []byte) {
		for range 2 { // the second time, fields seen are shared
			w := s.Split(raw, nil)
			assert.Equal(t, len(raw), w.Len())
			assert.Equal(t, string(raw), string(w.AppendTo(nil)))
		}
	})
}

// The replicas of a Deployment hold inline only what they do not repeat.
func TestWireSharesWhatReplicasRepeat(t *testing.T) {
	s := NewWireSplitter()
	var raws, inline int64
	for d := range 10 {
		deployment := workload.Deployment("shop", d, 10)
		for r := range 10 {
			raw := marshal(t, workload.Pod(deployment, r))
			w := s.Split(raw, nil)
			require.Equal(t, string(raw), string(w.AppendTo(nil)))
			if r > 0 {
				raws += int64(len(raw))
				inline += w.InlineBytes()
			}
		}
	}
	t.Logf("replicas after the first hold %.2f× their encoding inline", float64(inline)/float64(raws))
	// About 0.43×: each container mounts the Pod's own token volume, so
	// the containers are split, and their names and mounts stay inline.
	assert.Less(t, float64(inline), 0.5*float64(raws))
}

// footprint estimates the heap wires take: what each holds inline, and
// each shared field once.
func footprint(wires []Wire) int64 {
	var n int64
	seen := make(map[unique.Handle[string]]bool)
	for _, w := range wires {
		n += w.InlineBytes()
		for f := range w.Shared() {
			if !seen[f] {
				seen[f] = true
				n += WireFieldBytes(f)
			}
		}
	}
	return n
}

// Updates keep what replicas share: a field an object held before is no
// sign that another holds it.
func TestWireSharingSurvivesUpdates(t *testing.T) {
	s := NewWireSplitter()
	var (
		pods  []*corev1.Pod
		wires []Wire
	)
	for d := range 10 {
		deployment := workload.Deployment("shop", d, 10)
		for r := range 10 {
			pod := workload.Pod(deployment, r)
			pods = append(pods, pod)
			wires = append(wires, s.Split(marshal(t, pod), nil))
		}
	}
	before := footprint(wires)
	for round := range 3 {
		for i, pod := range pods {
			pod.Annotations["round"] = fmt.Sprint(round)
			raw := marshal(t, pod)
			wires[i] = s.Split(raw, &wires[i])
			require.Equal(t, string(raw), string(wires[i].AppendTo(nil)))
		}
	}
	after := footprint(wires)
	t.Logf("100 Pods: about %d B before 3 rounds of updates, %d after", before, after)
	assert.Less(t, float64(after), 1.1*float64(before))
}

// An update shares the fields of the encoding it replaces, though the
// splitter has seen neither.
func TestWireSharesWithWhatItReplaces(t *testing.T) {
	pod := workload.Pod(workload.Deployment("shop", 1, 2), 0)
	before := NewWireSplitter()
	before.Split(marshal(t, pod), nil)
	old := before.Split(marshal(t, pod), nil)
	require.NotEmpty(t, old.parts)

	pod.Annotations["updated"] = "yes"
	raw := marshal(t, pod)
	alone := NewWireSplitter().Split(raw, nil)
	updated := NewWireSplitter().Split(raw, &old)
	assert.Equal(t, string(raw), string(updated.AppendTo(nil)))
	t.Logf("inline: %d B of %d with the old encoding, %d without", updated.InlineBytes(), len(raw), alone.InlineBytes())
	assert.Less(t, updated.InlineBytes(), alone.InlineBytes()/2)
}

// A shared field is released once no Wire holds it.
func TestWireReleasesWhatNoWireHolds(t *testing.T) {
	s := NewWireSplitter()
	var (
		wires []Wire
		held  []weak.Pointer[byte]
	)
	deployment := workload.Deployment("shop", 1, 5)
	for r := range 5 {
		wires = append(wires, s.Split(marshal(t, workload.Pod(deployment, r)), nil))
	}
	for _, w := range wires {
		for h := range w.Shared() {
			held = append(held, weak.Make(unsafe.StringData(h.Value())))
		}
	}
	require.NotEmpty(t, held)
	runtime.KeepAlive(wires)
	wires = nil //nolint:ineffassign,wastedassign // dropped, for the collector
	require.Eventually(t, func() bool {
		runtime.GC()
		for _, p := range held {
			if p.Value() != nil {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
}

package decode

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/fxkube/fxkube/internal/workload"
)

// FuzzDecode decodes encodings of Pods, truncated or corrupt, both with
// the generated code and with decoders that hold their Deployment's
// replicas: one keeping everything, one dropping managedFields. The
// first fails where the generated code does, with its error; the one
// dropping managedFields may succeed where only they are corrupt.
// Neither panics, and what decodes equals the generated code's object.
//
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 30s ./internal/decode
func FuzzDecode(f *testing.F) {
	keep, strip := newStore(f, &corev1.Pod{}), newStore(f, &corev1.Pod{}, WithoutManagedFields())
	deployment := workload.Deployment("shop", 1, 4)
	for r := range 4 {
		raw := marshal(f, withManagedFields(workload.Pod(deployment, r)))
		keep.hold(f, raw)
		strip.hold(f, raw)
		f.Add(raw)
		f.Add(raw[:len(raw)/2])
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want := &corev1.Pod{}
		wantErr := want.Unmarshal(raw)
		got, err := keep.decoder.Decode(raw)
		if wantErr != nil {
			require.Error(t, err, "the generated code fails: %v", wantErr)
			require.Equal(t, wantErr.Error(), err.Error(), "the same error")
			return
		}
		require.NoError(t, err)
		requireSame(t, want, got)
		got, err = strip.decoder.Decode(raw)
		require.NoError(t, err)
		want.ManagedFields = nil
		requireSame(t, want, got)
	})
}

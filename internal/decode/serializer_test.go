package decode

import (
	"bytes"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fxkube/fxkube/internal/workload"
)

// A Serializer decodes an object as a REST client of typed objects
// does without a decoder: its kind cleared. It clears the kind before
// the table takes the object, as a rebuild on another goroutine may
// read it from then on. The race detector (make test) checks that.
func TestSerializerDecodesAsTheRESTClient(t *testing.T) {
	scheme := clientgoscheme.Scheme
	var buf bytes.Buffer
	pod := workload.Pod(workload.Deployment("shop", 1, 3), 0)
	require.NoError(t, protobuf.NewSerializer(scheme, scheme).Encode(pod, &buf))

	s := newStore(t, &corev1.Pod{})
	ser := NewSerializer(scheme, corev1.SchemeGroupVersion.WithKind("Pod"))
	decoder, err := runtime.NewClientNegotiator(ser, corev1.SchemeGroupVersion).Decoder(runtime.ContentTypeProtobuf, nil)
	require.NoError(t, err)
	want, _, err := decoder.Decode(buf.Bytes(), nil, nil)
	require.NoError(t, err)
	require.True(t, want.GetObjectKind().GroupVersionKind().Empty(), "the REST client clears kinds")

	ser.Use(s.decoder)
	// Each Dropped of a store holding nothing rebuilds the table, which
	// reads the objects it took and the store does not hold yet.
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				s.table.Dropped(&corev1.Pod{})
			}
		}
	})
	for range 50 {
		got, gvk, err := decoder.Decode(buf.Bytes(), nil, nil)
		require.NoError(t, err)
		assert.Equal(t, corev1.SchemeGroupVersion.WithKind("Pod"), *gvk)
		require.True(t, equality.Semantic.DeepEqual(want, got))
	}
	close(done)
	wg.Wait()
}

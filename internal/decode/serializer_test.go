package decode

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/framer"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

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
	defer wg.Wait()
	defer close(done)
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
}

// eventDecoders returns a Serializer's stream decoder of watch events,
// and client-go's.
func eventDecoders(t testing.TB) (ours, theirs runtime.Decoder) {
	scheme := clientgoscheme.Scheme
	ser := NewSerializer(scheme, corev1.SchemeGroupVersion.WithKind("Pod"))
	info, ok := runtime.SerializerInfoForMediaType(ser.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.True(t, ok)
	plain, ok := runtime.SerializerInfoForMediaType(serializer.NewCodecFactory(scheme).SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.True(t, ok)
	return info.StreamSerializer.Serializer, plain.StreamSerializer.Serializer
}

// eventFrames are encodings of watch events: whole, truncated, with each
// field twice, with an unknown field, and with a second, empty object.
func eventFrames(t testing.TB) [][]byte {
	var frames [][]byte
	for _, typ := range []string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "OTHER", ""} {
		for _, raw := range [][]byte{[]byte("k8s\x00object"), {}, nil} {
			frame, err := (&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}).Marshal()
			require.NoError(t, err)
			frames = append(frames, frame)
			for n := range frame {
				frames = append(frames, frame[:n])
			}
			frames = append(frames, append(slices.Clone(frame), frame...),
				append(slices.Clone(frame), 0x18, 0x01),
				append(slices.Clone(frame), 0x12, 0x00))
		}
	}
	return frames
}

// requireEventAsTheirs decodes frame with both decoders: both fail with
// the same error, or give the same event and kind.
func requireEventAsTheirs(t testing.TB, ours, theirs runtime.Decoder, frame []byte) {
	var want, got metav1.WatchEvent
	_, wantGVK, wantErr := theirs.Decode(frame, nil, &want)
	obj, gvk, err := ours.Decode(frame, nil, &got)
	if wantErr != nil {
		require.EqualError(t, err, wantErr.Error())
		return
	}
	require.NoError(t, err)
	require.Same(t, &got, obj)
	require.Equal(t, wantGVK, gvk)
	require.Equal(t, want, got)
}

// A watch event's frame decodes as the stream serializer decodes it,
// truncated, repeated or with unknown fields too; its object is left in
// the frame rather than copied.
func TestWatchEventsDecodeAsTheStreamSerializer(t *testing.T) {
	ours, theirs := eventDecoders(t)
	for i, frame := range eventFrames(t) {
		t.Run(fmt.Sprint(i), func(t *testing.T) { requireEventAsTheirs(t, ours, theirs, frame) })
	}

	frame, err := (&metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: []byte("object")}}).Marshal()
	require.NoError(t, err)
	var event metav1.WatchEvent
	_, _, err = ours.Decode(frame, nil, &event)
	require.NoError(t, err)
	require.Same(t, unsafe.SliceData(frame[len(frame)-len("object"):]), unsafe.SliceData(event.Object.Raw), "the object is left in the frame")
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() {
		_, _, _ = ours.Decode(frame, nil, &event)
	}), "decoding a frame allocates only the kind it returns")
}

// FuzzWatchEvent decodes watch events' frames, corrupt or not, with a
// Serializer's stream decoder and client-go's: the same error, or the
// same event.
//
//	go test -run '^$' -fuzz FuzzWatchEvent -fuzztime 30s ./internal/decode
func FuzzWatchEvent(f *testing.F) {
	ours, theirs := eventDecoders(f)
	for _, frame := range eventFrames(f) {
		f.Add(frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) { requireEventAsTheirs(t, ours, theirs, frame) })
}

// A REST client's watch through a Serializer decodes each Pod as the
// API server sent it, with and without a decoder. The frames' buffer is
// read into again for each event, so an object that kept a slice of it
// would change as later events come.
func TestWatchThroughSerializerKeepsNothingOfTheFrames(t *testing.T) {
	scheme := clientgoscheme.Scheme
	deployment := workload.Deployment("shop", 1, 40)
	var want []*corev1.Pod
	var body bytes.Buffer
	encoder := protobuf.NewSerializer(scheme, scheme)
	frames := framer.NewLengthDelimitedFrameWriter(&body)
	for r := range 40 {
		pod := workload.Pod(deployment, r)
		var object bytes.Buffer
		require.NoError(t, encoder.Encode(pod, &object))
		frame, err := (&metav1.WatchEvent{Type: string(watch.Added), Object: runtime.RawExtension{Raw: object.Bytes()}}).Marshal()
		require.NoError(t, err)
		_, err = frames.Write(frame)
		require.NoError(t, err)
		pod.TypeMeta = metav1.TypeMeta{} // the REST client clears kinds
		want = append(want, pod)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf+";stream=watch")
		_, _ = w.Write(body.Bytes())
	}))
	defer srv.Close()

	for _, decoding := range []bool{false, true} {
		t.Run(fmt.Sprintf("decoder=%t", decoding), func(t *testing.T) {
			ser := NewSerializer(scheme, corev1.SchemeGroupVersion.WithKind("Pod"))
			if decoding {
				ser.Use(newStore(t, &corev1.Pod{}).decoder)
			}
			client, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, APIPath: "/api", Transport: srv.Client().Transport,
				ContentConfig: rest.ContentConfig{GroupVersion: &corev1.SchemeGroupVersion, NegotiatedSerializer: ser,
					AcceptContentTypes: runtime.ContentTypeProtobuf, ContentType: runtime.ContentTypeProtobuf}})
			require.NoError(t, err)
			w, err := client.Get().Resource("pods").Param("watch", "true").Watch(t.Context())
			require.NoError(t, err)
			defer w.Stop()
			var got []runtime.Object
			for event := range w.ResultChan() {
				require.Equal(t, watch.Added, event.Type, "%v", event.Object)
				got = append(got, event.Object)
			}
			require.Len(t, got, len(want))
			for i := range want {
				require.True(t, equality.Semantic.DeepEqual(want[i], got[i]), "Pod %d", i)
			}
		})
	}
}

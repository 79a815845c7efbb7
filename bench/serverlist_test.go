package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/framer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// serverReads is how many times the API server alone serves each read;
// the median counts.
const serverReads = 3

// Metrics of the API server alone ("system=api-server").
const (
	mServerStream = "server-stream-ms" // a streamed list, read, not decoded
	mServerList   = "server-list-ms"   // a LIST, read, not decoded
)

// benchServerReads measures how long the API server alone takes to
// serve w's first kind as the systems' stores ask for it, with nothing
// decoded but each watch event's frame:
//
//   - a streamed list (a watch sending its initial events, which stores
//     use), until the bookmark that ends the initial events;
//   - a plain LIST, read whole.
//
// Both ask for protobuf and accept gzip, as the systems' clients do.
// A system cannot sync faster than the stream: the difference is its
// own work.
func benchServerReads(b *testing.B, kube kubernetes.Interface, w kindsWorkload) {
	k := w.kinds[0]
	rc := kube.CoreV1().RESTClient()
	if !slices.Contains([]string{"pods", "configmaps"}, k.resource) {
		b.Skipf("the API server alone is measured for kinds of the core group, which the systems read as protobuf; not %s", k.resource)
	}
	var streams, lists []float64
	for range serverReads {
		settle(b)
		d, n, err := streamedList(b.Context(), rc, k.resource, k.selector)
		if err != nil {
			b.Fatal(err)
		}
		if n != w.objects {
			b.Fatalf("the streamed list sent %d objects; want %d", n, w.objects)
		}
		streams = append(streams, ms(d))
		settle(b)
		d, err = plainList(b.Context(), rc, k.resource, k.selector)
		if err != nil {
			b.Fatal(err)
		}
		lists = append(lists, ms(d))
	}
	for b.Loop() {
	}
	b.ReportMetric(0, "ns/op")
	for name, v := range map[string][]float64{mServerStream: streams, mServerList: lists} {
		b.ReportMetric(median(v), name)
		kindResults.record(w.objects, kindsName(w, apiServerAlone), name, median(v))
	}
}

// apiServerAlone names the API server's own figures in kindResults.
const apiServerAlone = "api-server"

// streamedList opens a watch that sends its initial events, selecting
// objects of resource by selector, and reads it until the bookmark that
// ends them. It returns how long that took and how many objects came.
func streamedList(ctx context.Context, rc rest.Interface, resource, selector string) (time.Duration, int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := &metav1.ListOptions{LabelSelector: selector, Watch: true, AllowWatchBookmarks: true,
		SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
	began := time.Now()
	body, err := rc.Get().Resource(resource).VersionedParams(opts, clientgoscheme.ParameterCodec).
		SetHeader("Accept", runtime.ContentTypeProtobuf+";stream=watch").Stream(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer body.Close()
	frames := framer.NewLengthDelimitedFrameReader(body)
	buf, objects := make([]byte, 64<<10), 0
	for {
		n, err := readFrame(frames, &buf)
		if err != nil {
			return 0, 0, fmt.Errorf("after %d objects: %w", objects, err)
		}
		var event metav1.WatchEvent
		if err := event.Unmarshal(buf[:n]); err != nil {
			return 0, 0, err
		}
		if event.Type != string(watch.Bookmark) {
			objects++
			continue
		}
		obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(event.Object.Raw, nil, nil)
		if err != nil {
			return 0, 0, err
		}
		if m, ok := obj.(metav1.Object); ok && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			return time.Since(began), objects, nil
		}
	}
}

// readFrame reads the next frame into *buf, growing it as needed, and
// returns its length.
func readFrame(frames io.Reader, buf *[]byte) (int, error) {
	n := 0
	for {
		m, err := frames.Read((*buf)[n:])
		n += m
		if errors.Is(err, io.ErrShortBuffer) {
			*buf = append(*buf, make([]byte, len(*buf))...)
			continue
		}
		return n, err
	}
}

// plainList lists the objects of resource selected by selector, as
// protobuf, and reads the body whole without decoding it.
func plainList(ctx context.Context, rc rest.Interface, resource, selector string) (time.Duration, error) {
	began := time.Now()
	body, err := rc.Get().Resource(resource).VersionedParams(&metav1.ListOptions{LabelSelector: selector}, clientgoscheme.ParameterCodec).
		SetHeader("Accept", runtime.ContentTypeProtobuf).Stream(ctx)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	n, err := io.Copy(io.Discard, body)
	if err == nil && n == 0 {
		err = errors.New("an empty list")
	}
	return time.Since(began), err
}

package informers_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/fxkube/fxkube/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait for an asynchronous event; tests pass well within
// it and fail, not hang, when an event never comes.
const wait = 5 * time.Second

// configMap returns a ConfigMap labelled app=app (none when app is empty)
// whose annotation v tells its versions apart in recorded events.
func configMap(ns, name, app, v string) *corev1.ConfigMap {
	opts := []testenv.ConfigMapOption{testenv.Annotations{"v": v}}
	if app != "" {
		opts = append(opts, testenv.Labels{"app": app})
	}
	return testenv.ConfigMap(ns, name, opts...)
}

// describe names obj in recorded events and reads: "ns/name v=1", "meta
// ns/name v=1" for a projection, "tombstone ns/name of ..." for a
// tombstone.
func describe(obj any) string {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return fmt.Sprintf("%s/%s v=%s", o.Namespace, o.Name, o.Annotations["v"])
	case *metav1.PartialObjectMetadata:
		return fmt.Sprintf("meta %s/%s v=%s", o.Namespace, o.Name, o.Annotations["v"])
	case cache.DeletedFinalStateUnknown:
		return fmt.Sprintf("tombstone %s of %s", o.Key, describe(o.Obj))
	default:
		return fmt.Sprintf("%T", obj)
	}
}

// describeAll describes items, sorted.
func describeAll(items []any) []string {
	out := make([]string, 0, len(items))
	for _, item := range items {
		out = append(out, describe(item))
	}
	slices.Sort(out)
	return out
}

// sorted returns a sorted copy of s, never nil.
func sorted(s []string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return out
}

// fakeInformer is an informer over a fake source of ConfigMaps, indexed by
// namespace, with a probe handler that tells when it has handled a change.
type fakeInformer struct {
	cache.SharedIndexInformer
	source *fcache.FakeControllerSource
	probe  *recorder
}

// newFakeInformer returns an informer, not yet running, whose source holds
// objs; its source shuts down when the test ends.
func newFakeInformer(t *testing.T, indexers cache.Indexers, objs ...*corev1.ConfigMap) *fakeInformer {
	t.Helper()
	source := fcache.NewFakeControllerSource()
	t.Cleanup(source.Shutdown) // after the informer stops: cleanups run last first
	for _, obj := range objs {
		source.Add(obj)
	}
	all := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	for name, f := range indexers {
		all[name] = f
	}
	f := &fakeInformer{
		SharedIndexInformer: cache.NewSharedIndexInformer(source, &corev1.ConfigMap{}, 0, all),
		source:              source,
		probe:               &recorder{},
	}
	_, err := f.AddEventHandler(f.probe)
	require.NoError(t, err)
	return f
}

// start runs the informer until the test ends, when it is stopped and
// waited for, and waits until it has synced.
func (f *fakeInformer) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.RunWithContext(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	require.Eventually(t, f.HasSynced, wait, time.Millisecond, "informer never synced")
	f.probe.waitLen(t, len(f.GetStore().ListKeys()))
}

// change makes a change to the source and waits until the informer has
// handled it: its store and the events it sent to handlers added before
// are up to date.
func (f *fakeInformer) change(t *testing.T, do func(*fcache.FakeControllerSource)) {
	t.Helper()
	n := len(f.probe.all())
	do(f.source)
	f.probe.waitLen(t, n+1)
}

// dropAndRelist deletes objs from the source without telling watchers,
// then breaks the watch: the informer relists and hands its handlers a
// tombstone for each. It waits until they have been handed.
func (f *fakeInformer) dropAndRelist(t *testing.T, objs ...*corev1.ConfigMap) {
	t.Helper()
	n := len(f.probe.all())
	for _, obj := range objs {
		f.source.DeleteDropWatch(obj)
	}
	f.source.ResetWatch()
	f.probe.waitLen(t, n+len(objs))
}

// recorder is a handler that records the events it gets, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) OnAdd(obj any, isInInitialList bool) {
	r.record(fmt.Sprintf("add %s initial=%t", describe(obj), isInInitialList))
}

func (r *recorder) OnUpdate(oldObj, newObj any) {
	r.record(fmt.Sprintf("update %s -> %s", describe(oldObj), describe(newObj)))
}

func (r *recorder) OnDelete(obj any) { r.record("delete " + describe(obj)) }

func (r *recorder) record(event string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event)
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitLen waits until r has recorded at least n events and returns them.
func (r *recorder) waitLen(t *testing.T, n int) []string {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.all()) >= n }, wait, time.Millisecond,
		"want %d events, got %q", n, r.all())
	return r.all()
}

// waitFor waits until r has recorded event and returns every event so far.
func (r *recorder) waitFor(t *testing.T, event string) []string {
	t.Helper()
	require.Eventually(t, func() bool { return slices.Contains(r.all(), event) }, wait, time.Millisecond,
		"want event %q, got %q", event, r.all())
	return r.all()
}

// gated is a recorder whose OnAdd blocks, for the objects block selects,
// until the gate opens: a handler still busy with its initial list.
type gated struct {
	recorder
	block   func(obj any) bool
	gate    chan struct{}
	entered chan struct{} // closed when an OnAdd first blocks
	once    sync.Once
}

// newGated returns a gated recorder whose gate opens when the test ends,
// before the informers it was added to stop (which wait for it).
func newGated(t *testing.T, block func(obj any) bool) *gated {
	g := &gated{block: block, gate: make(chan struct{}), entered: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gated) OnAdd(obj any, isInInitialList bool) {
	if g.block(obj) {
		g.once.Do(func() { close(g.entered) })
		<-g.gate
	}
	g.recorder.OnAdd(obj, isInInitialList)
}

func (g *gated) open() {
	select {
	case <-g.gate:
	default:
		close(g.gate)
	}
}

// waitEntered waits until an OnAdd of g's is blocked at its gate.
func (g *gated) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(wait):
		t.Fatal("handler never got a blocked object")
	}
}

// isDone reports whether c is done, without waiting.
func isDone(c cache.DoneChecker) func() bool {
	return func() bool { return cache.IsDone(c) }
}

// never is how long a test watches for something that must not happen
// when there is no later event to wait for instead.
const never = 50 * time.Millisecond

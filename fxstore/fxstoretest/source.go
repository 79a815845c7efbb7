package fxstoretest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"go.uber.org/fx"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/listwatch"
	"github.com/fxkube/fxkube/internal/storehooks"
)

// Source is an in-memory fxstore.Source. It is safe for concurrent use.
type Source struct {
	client client.WithWatch

	mu   sync.Mutex
	hold chan struct{} // while non-nil, lists wait for it to close
	// ignoreShards makes the source send every object to a sharded store,
	// as an API server without ShardedListAndWatch does.
	ignoreShards bool
	// failWith, when set, is what lists and watches fail with (Fail).
	failWith error
	// watches are the watches open, which Fail ends.
	watches map[*filteredWatch]struct{}
}

var _ fxstore.Source = (*Source)(nil)

// hooks are what fxstore does for the source: select and make lists as
// the API server does.
var hooks = storehooks.Get[*fxstore.Registry, fxstore.Key, fxstore.Spec, fxstore.Option]()

// NewSource returns a Source holding objs. Types must be in scheme, except
// for unstructured objects. The client's REST mapper knows every kind in
// scheme, as namespaced unless built-in and cluster-scoped, so that
// handler.EnqueueRequestForOwner works with it. Every kind whose Go type has
// a Status field has a status subresource, as kubebuilder's
// +kubebuilder:subresource:status gives CRDs, so Status().Update works.
func NewSource(scheme *k8sruntime.Scheme, objs ...client.Object) *Source {
	return &Source{client: fake.NewClientBuilder().WithScheme(scheme).
		WithRESTMapper(testrestmapper.TestOnlyStaticRESTMapper(scheme)).
		WithStatusSubresource(withStatus(scheme)...).
		WithObjects(objs...).Build()}
}

// withStatus returns an example of each kind of scheme whose Go type has a
// Status field.
func withStatus(scheme *k8sruntime.Scheme) []client.Object {
	var objs []client.Object
	for _, typ := range scheme.AllKnownTypes() {
		if f, ok := typ.FieldByName("Status"); !ok || f.Type.Kind() != reflect.Struct {
			continue
		}
		if obj, ok := reflect.New(typ).Interface().(client.Object); ok {
			objs = append(objs, obj)
		}
	}
	return objs
}

// Client returns the client holding the source's objects. Creating,
// updating and deleting through it sends watch events to bound stores.
func (s *Source) Client() client.WithWatch { return s.client }

// HoldLists makes stores' lists wait until release is called, to keep stores
// unsynced while a test looks.
func (s *Source) HoldLists() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == nil {
		s.hold = make(chan struct{})
	}
	hold := s.hold
	return sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		close(hold)
		if s.hold == hold {
			s.hold = nil
		}
	})
}

// Fail makes every list and watch fail with err, as an API server that
// refuses the app (forbidden) or is away does, and ends the watches open:
// bound stores begin to fail (Store.Err). Restore lets them work again;
// they catch up after client-go's backoff, within seconds.
func (s *Source) Fail(err error) (restore func()) {
	s.mu.Lock()
	s.failWith = err
	watches := s.watches
	s.watches = nil
	s.mu.Unlock()
	for w := range watches {
		w.Stop()
	}
	return sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.failWith = nil
	})
}

// failure returns what lists and watches fail with, if anything.
func (s *Source) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failWith
}

// IgnoreShardSelectors makes the source do what an API server without the
// ShardedListAndWatch feature gate does: ignore sharded stores' shard
// selectors, sending them every object, and say so when asked
// (AppliesShardSelectors). It affects stores bound afterwards.
func (s *Source) IgnoreShardSelectors() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ignoreShards = true
}

// AppliesShardSelectors tells the registry whether the source applies shard
// selectors, as an API server answers (see IgnoreShardSelectors).
func (s *Source) AppliesShardSelectors(context.Context, fxstore.Key) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ignoreShards, nil
}

func (s *Source) waitForRelease(ctx context.Context) error {
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	if hold == nil {
		return nil
	}
	select {
	case <-hold:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Bind implements fxstore.Source. Field selectors may use metadata.name and
// metadata.namespace, as the fake cannot evaluate other fields.
func (s *Source) Bind(_ context.Context, key fxstore.Key) (fxstore.Binding, error) {
	// What the API server selects, selected the way a view of a broader
	// store filters.
	selected := key
	if applied, _ := s.AppliesShardSelectors(context.Background(), key); !applied {
		selected.Shard = ""
	}
	matches, err := hooks.Matcher(selected)
	if err != nil {
		return fxstore.Binding{}, fmt.Errorf("fxstoretest: %w", err)
	}
	scheme := s.client.Scheme()
	native := key
	if !scheme.Recognizes(key.Kind) {
		native.Projection = fxstore.Unstructured
	} else {
		native.Projection = fxstore.Typed
	}
	newNative, err := listwatch.Lists(scheme, native)
	if err != nil {
		return fxstore.Binding{}, err
	}
	newProjected, err := listwatch.Lists(scheme, key)
	if err != nil {
		return fxstore.Binding{}, err
	}
	gvr, _ := meta.UnsafeGuessKindToResource(key.Kind)
	lw := &listerWatcher{
		source: s, key: key, newNative: newNative, newProjected: newProjected,
		matches:  matches,
		selected: make(map[string]bool),
	}
	return fxstore.Binding{ListerWatcher: lw, Resource: gvr.GroupResource()}, nil
}

// listerWatcher lists and watches the fake client and does what the API
// server does for a store's key: select, and project.
type listerWatcher struct {
	source       *Source
	key          fxstore.Key
	newNative    func() client.ObjectList
	newProjected func() client.ObjectList
	matches      func(client.Object) bool

	mu       sync.Mutex
	selected map[string]bool // keys of objects the store was last told match
	// pending is the watch List opened before listing, so that no change
	// between the list and the watch is lost; the next Watch returns it.
	pending watch.Interface
}

var _ cache.ListerWatcherWithContext = (*listerWatcher)(nil)

func (lw *listerWatcher) List(opts metav1.ListOptions) (k8sruntime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

func (lw *listerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

func (lw *listerWatcher) ListWithContext(ctx context.Context, _ metav1.ListOptions) (k8sruntime.Object, error) {
	if err := lw.source.waitForRelease(ctx); err != nil {
		return nil, err
	}
	if err := lw.source.failure(); err != nil {
		return nil, err
	}
	// Watch first: changes after this point reach the watch, and those the
	// list already holds come again as harmless updates.
	w, err := lw.source.client.Watch(ctx, lw.newNative(), client.InNamespace(lw.key.Namespace))
	if err != nil {
		return nil, err
	}
	native := lw.newNative()
	if err := lw.source.client.List(ctx, native, client.InNamespace(lw.key.Namespace)); err != nil {
		w.Stop()
		return nil, err
	}
	items, err := meta.ExtractList(native)
	if err != nil {
		w.Stop()
		return nil, err
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.pending != nil {
		lw.pending.Stop()
	}
	lw.pending = w
	clear(lw.selected)
	var out []k8sruntime.Object
	for _, item := range items {
		obj, err := lw.project(item)
		if err != nil {
			return nil, err
		}
		if lw.matches(obj) {
			lw.selected[cacheKey(obj)] = true
			out = append(out, obj)
		}
	}
	list := lw.newProjected()
	if err := meta.SetList(list, out); err != nil {
		return nil, err
	}
	list.SetResourceVersion(native.GetResourceVersion())
	return list, nil
}

func (lw *listerWatcher) WatchWithContext(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
	lw.mu.Lock()
	w := lw.pending
	lw.pending = nil
	lw.mu.Unlock()
	if err := lw.source.failure(); err != nil {
		if w != nil {
			w.Stop()
		}
		return nil, err
	}
	if w == nil {
		var err error
		if w, err = lw.source.client.Watch(ctx, lw.newNative(), client.InNamespace(lw.key.Namespace)); err != nil {
			return nil, err
		}
	}
	return newFilteredWatch(w, lw.filter, lw.source.track), nil
}

// track holds w among the watches open until ended is called.
func (s *Source) track(w *filteredWatch) (ended func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watches == nil {
		s.watches = make(map[*filteredWatch]struct{})
	}
	s.watches[w] = struct{}{}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.watches, w)
	}
}

// filter projects an event and turns it into what a selecting watch would
// send: objects that stop matching are deleted, ones that start are added.
func (lw *listerWatcher) filter(in watch.Event) (watch.Event, bool) {
	if in.Type != watch.Added && in.Type != watch.Modified && in.Type != watch.Deleted {
		return in, true
	}
	obj, err := lw.project(in.Object)
	if err != nil {
		return watch.Event{Type: watch.Error, Object: nil}, false
	}
	key := cacheKey(obj)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	was, now := lw.selected[key], lw.matches(obj) && in.Type != watch.Deleted
	switch {
	case now:
		lw.selected[key] = true
		if !was {
			return watch.Event{Type: watch.Added, Object: obj}, true
		}
		return watch.Event{Type: watch.Modified, Object: obj}, true
	case was:
		delete(lw.selected, key)
		return watch.Event{Type: watch.Deleted, Object: obj}, true
	}
	return in, false
}

// filteredWatch is watch.Filter that gives up an event nobody reads once
// stopped; watch.Filter's goroutine blocks on it forever when a write races
// a store's stop.
type filteredWatch struct {
	in     watch.Interface
	out    chan watch.Event
	filter func(watch.Event) (watch.Event, bool)
	stop   chan struct{}
	once   sync.Once
	ended  func() // called once the watch has ended
}

func newFilteredWatch(in watch.Interface, filter func(watch.Event) (watch.Event, bool), track func(*filteredWatch) (ended func())) *filteredWatch {
	w := &filteredWatch{in: in, out: make(chan watch.Event), filter: filter, stop: make(chan struct{})}
	w.ended = track(w)
	go w.loop()
	return w
}

func (w *filteredWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *filteredWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}

func (w *filteredWatch) loop() {
	defer close(w.out)
	defer w.ended()
	for ev := range w.in.ResultChan() {
		if ev, ok := w.filter(ev); ok {
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		}
	}
}

// IsWatchListSemanticsUnSupported tells client-go's reflector that the fake
// cannot stream an initial list in a watch.
func (lw *listerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// project converts an object held by the fake into the key's projection.
func (lw *listerWatcher) project(in k8sruntime.Object) (client.Object, error) {
	var content map[string]any
	if u, ok := in.(*unstructured.Unstructured); ok {
		content = u.Object
	} else {
		var err error
		if content, err = k8sruntime.DefaultUnstructuredConverter.ToUnstructured(in); err != nil {
			return nil, err
		}
	}
	switch lw.key.Projection {
	case fxstore.Unstructured:
		u := &unstructured.Unstructured{Object: content}
		u.SetGroupVersionKind(lw.key.Kind)
		return u, nil
	case fxstore.Metadata:
		m := &metav1.PartialObjectMetadata{}
		if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(content, m); err != nil {
			return nil, err
		}
		m.SetGroupVersionKind(lw.key.Kind)
		return m, nil
	}
	out, err := lw.source.client.Scheme().New(lw.key.Kind)
	if err != nil {
		return nil, err
	}
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(content, out); err != nil {
		return nil, err
	}
	return out.(client.Object), nil
}

func cacheKey(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// Module gives an app fxstore.Module and, as its fxstore.Source, an
// in-memory Source holding objs, in place of an API server. The Source is
// provided too, to write objects during a test. The app's lifecycle starts
// the stores on it, as on an API server: fxcontrollertest.Module brings
// one with its servers off, or add lifecycle.Options.
//
// Stopping the app fails, naming the object and what changed, if code
// changed an object it read from a store: objects are shared and
// read-only. fxtest.New's app then fails the test.
func Module(objs ...client.Object) fx.Option {
	return fx.Options(
		fxstore.Module,
		fx.Provide(
			func(scheme *k8sruntime.Scheme) *Source { return NewSource(scheme, objs...) },
			func(s *Source) fxstore.Source { return s },
		),
		fx.Invoke(detectMutations),
	)
}

// detectMutations checks, as the app stops, that no one changed an object
// read from a store.
func detectMutations(lc fx.Lifecycle, r *fxstore.Registry) error {
	check, err := hooks.DetectMutations(r)
	if err != nil {
		return err
	}
	lc.Append(fx.StopHook(check))
	return nil
}

// Start starts every store of r on src and waits until they have synced; the
// stores stop when the test ends. The test fails, naming the object and
// what changed, if code changed an object it read from a store: objects
// are shared and read-only.
func Start(t testing.TB, r *fxstore.Registry, src *Source) {
	t.Helper()
	check, err := hooks.DetectMutations(r)
	if err != nil {
		t.Fatalf("start stores: %v", err)
	}
	t.Cleanup(func() {
		if err := check(); err != nil {
			t.Error(err)
		}
	})
	if err := r.Start(t.Context(), src); err != nil {
		t.Fatalf("start stores: %v", err)
	}
	t.Cleanup(r.Stop)
	if err := r.WaitForSync(t.Context()); err != nil {
		t.Fatalf("sync stores: %v", err)
	}
}

package test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
)

// viewSoakEnv lengthens each seed's churn of TestViewsMatchTheAPIServer to
// a duration, such as FXKUBE_VIEWS_SOAK=10m, with a checkpoint every
// viewRoundOps operations.
const viewSoakEnv = "FXKUBE_VIEWS_SOAK"

const (
	viewRoundOps   = 100             // operations between checkpoints
	viewRounds     = 2               // checkpoints after churn, unless soaking
	viewRoundTime  = 3 * time.Second // at most, per round, unless soaking
	viewMaxObjects = 40
	viewConverge   = 30 * time.Second
)

// Stores of random specs over ConfigMaps, many of them views of broader
// ones, hold exactly what the API server's own LIST with each spec returns,
// under random churn, and every subscriber's events replay to that same
// set: an object relabelled into a view is added, out of it deleted.
func TestViewsMatchTheAPIServer(t *testing.T) {
	var soak time.Duration
	if s := os.Getenv(viewSoakEnv); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "%s takes a duration such as 10m", viewSoakEnv)
		soak = d
	}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { checkViewsAgainstAPIServer(t, seed, soak) })
	}
}

func checkViewsAgainstAPIServer(t *testing.T, seed uint64, soak time.Duration) {
	ctx := t.Context()
	cfg := testenv.Config(t)
	scheme := k8sruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)

	w := &viewWorld{
		rng:     rand.New(rand.NewPCG(seed, 13)),
		sample:  rand.New(rand.NewPCG(seed, 14)),
		c:       direct,
		objects: make(map[string]*corev1.ConfigMap),
		history: make(map[string][]string),
	}
	// Namespaces made with GenerateName keep seeds and -count runs apart.
	for range 3 {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("views-s%d-", seed)}}
		require.NoError(t, direct.Create(ctx, ns))
		w.namespaces = append(w.namespaces, ns.Name)
	}
	t.Cleanup(func() {
		// Leave no ConfigMaps for later tests' stores of all namespaces.
		for _, ns := range w.namespaces {
			assert.NoError(t, direct.DeleteAllOf(context.Background(), &corev1.ConfigMap{}, client.InNamespace(ns)))
		}
	})
	// Some objects exist before the stores start, for their initial lists.
	for range 12 + w.rng.IntN(8) {
		require.NoError(t, w.create(ctx))
	}

	reg := fxstore.NewRegistry(scheme, fxstore.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))))
	stores := requestViewStores(t, reg, w)
	conn, err := connection.New(cfg, scheme)
	require.NoError(t, err)
	t.Cleanup(conn.HTTPClient.CloseIdleConnections)
	t.Cleanup(reg.Stop)
	require.NoError(t, reg.Start(ctx, apiserver.NewSource(conn.Client)))

	// After Start, so that subscribing does not keep a store off a view;
	// before churn, so that each subscriber sees every change.
	for _, s := range stores {
		s.sub = &viewSubscriber{metadata: s.metadata}
		_, err := s.store.Subscribe(s.sub)
		require.NoError(t, err, s.store.String())
	}

	views, projected := 0, 0
	for _, info := range reg.Stores() {
		if info.ViewOf != nil {
			views++
			if info.Key.Projection != info.ViewOf.Projection {
				assert.Equal(t, [2]fxstore.Projection{fxstore.Metadata, fxstore.Typed}, [2]fxstore.Projection{info.Key.Projection, info.ViewOf.Projection},
					"%s is a view of %s: only metadata-only stores are views of another projection, typed", info.Key, info.ViewOf)
				projected++
			}
			t.Logf("%s → view of %s", info.Key, *info.ViewOf)
		} else {
			t.Logf("%s → informer", info.Key)
		}
	}
	require.Positive(t, views, "no store is a view: the test would not test views")
	t.Logf("%d views, %d of them metadata-only views of typed stores", views, projected)

	syncCtx, cancel := context.WithTimeout(ctx, viewConverge)
	defer cancel()
	require.NoError(t, reg.WaitForSync(syncCtx))
	checkViewStores(t, w, stores, "initial sync")

	start := time.Now()
	for round := 1; ; round++ {
		began, ops := time.Now(), 0
		for ; ops < viewRoundOps && (soak > 0 || time.Since(began) < viewRoundTime); ops++ {
			require.NoError(t, w.step(ctx))
		}
		t.Logf("round %d: %d operations in %v, %d objects", round, ops, time.Since(began).Round(time.Millisecond), len(w.objects))
		checkViewStores(t, w, stores, fmt.Sprintf("round %d", round))
		if soak > 0 && time.Since(start) >= soak || soak == 0 && round == viewRounds {
			break
		}
	}
	for _, s := range stores {
		t.Logf("%s: %d events", s.store, s.sub.events())
	}
}

// viewStore is one distinct store of the test, with the spec it was first
// asked for by.
type viewStore struct {
	store    objectStore
	spec     fxstore.Spec
	metadata bool
	sub      *viewSubscriber
}

// objectStore is a store of ConfigMaps, typed or metadata-only, read as
// client.Objects.
type objectStore interface {
	String() string
	Key() fxstore.Key
	Informer() cache.SharedIndexInformer
	Subscribe(h cache.ResourceEventHandler) (*fxstore.Subscription, error)
	Count() (int, error)
	Get(namespace, name string) (client.Object, error)
	List(opts ...client.ListOption) ([]client.Object, error)
}

// objects reads a store of T as an objectStore.
type objects[T client.Object] struct{ *fxstore.Store[T] }

func (s objects[T]) Get(namespace, name string) (client.Object, error) {
	return s.Store.Get(namespace, name)
}

func (s objects[T]) List(opts ...client.ListOption) ([]client.Object, error) {
	list, err := s.Store.List(opts...)
	out := make([]client.Object, len(list))
	for i, o := range list {
		out[i] = o
	}
	return out, err
}

var viewConfigMapKind = corev1.SchemeGroupVersion.WithKind("ConfigMap")

// viewLabelSelectors make subsets likely: the objects' labels are tier
// (front, back, edge or none) and app (web, db or none).
var viewLabelSelectors = []string{
	"", "tier=front", "tier in (front,back)", "tier", "!tier", "tier!=back",
	"tier notin (front,edge)", "tier=front,app=web", "tier in (front,back),app",
	"app", "app=web", "!app", "tier,!app", "app in (web),tier!=edge",
}

// requestViewStores asks reg, before it starts, for 6 to 10 distinct
// stores of random specs: always one broad typed store and one its views
// could be served from, so that views form.
func requestViewStores(t *testing.T, reg *fxstore.Registry, w *viewWorld) []*viewStore {
	t.Helper()
	rng := w.rng
	var stores []*viewStore
	seen := make(map[fxstore.Key]bool)
	request := func(spec fxstore.Spec, metadata bool) {
		t.Helper()
		consumer := fxstore.WithConsumer(fmt.Sprintf("request %d", len(stores)))
		var s objectStore
		if metadata {
			spec.Kind = viewConfigMapKind
			st, err := fxstore.For[*metav1.PartialObjectMetadata](reg, spec, consumer)
			require.NoError(t, err, "%+v", spec)
			s = objects[*metav1.PartialObjectMetadata]{st}
		} else {
			st, err := fxstore.For[*corev1.ConfigMap](reg, spec, consumer)
			require.NoError(t, err, "%+v", spec)
			s = objects[*corev1.ConfigMap]{st}
		}
		if !seen[s.Key()] {
			seen[s.Key()] = true
			stores = append(stores, &viewStore{store: s, spec: spec, metadata: metadata})
		}
	}
	namespace := func() string {
		if i := rng.IntN(len(w.namespaces) + 1); i < len(w.namespaces) {
			return w.namespaces[i]
		}
		return ""
	}
	fieldSelector := func() string {
		switch rng.IntN(10) {
		case 0:
			return "metadata.name=" + w.anyName()
		case 1:
			return "metadata.name!=" + w.anyName()
		case 2:
			return "metadata.namespace=" + w.namespaces[rng.IntN(len(w.namespaces))]
		}
		return ""
	}

	broad := fxstore.Spec{}
	if rng.IntN(2) == 0 {
		broad.Namespace = w.namespaces[0]
	}
	request(broad, false)
	request(fxstore.Spec{Namespace: broad.Namespace, LabelSelector: viewLabelSelectors[1+rng.IntN(len(viewLabelSelectors)-1)]}, false)
	if rng.IntN(2) == 0 {
		request(fxstore.Spec{LabelSelector: []string{"", "tier"}[rng.IntN(2)]}, true)
	}
	want := 6 + rng.IntN(5)
	for range 100 {
		if len(stores) == want {
			break
		}
		request(fxstore.Spec{
			Namespace:     namespace(),
			LabelSelector: viewLabelSelectors[rng.IntN(len(viewLabelSelectors))],
			FieldSelector: fieldSelector(),
		}, rng.IntN(3) == 0)
	}
	require.Len(t, stores, want)
	return stores
}

// viewWorld is what the test has written to the API server, and the
// random source of what it writes next.
type viewWorld struct {
	rng        *rand.Rand
	sample     *rand.Rand // which reads to check: apart from rng, so that what is written does not depend on what other tests left
	c          client.Client
	namespaces []string
	objects    map[string]*corev1.ConfigMap // by namespace/name, as last written
	deleted    []string                     // namespace/name, to create again
	history    map[string][]string          // namespace/name: what was written, for failures
	created    int
}

func (w *viewWorld) anyName() string { return fmt.Sprintf("cm-%d", w.rng.IntN(20)) }

func (w *viewWorld) randomLabels() map[string]string {
	l := map[string]string{}
	if v := []string{"front", "back", "edge", ""}[w.rng.IntN(4)]; v != "" {
		l["tier"] = v
	}
	if v := []string{"web", "db", ""}[w.rng.IntN(3)]; v != "" {
		l["app"] = v
	}
	return l
}

// pick returns a random object, in a seeded order.
func (w *viewWorld) pick() *corev1.ConfigMap {
	keys := slices.Sorted(maps.Keys(w.objects))
	return w.objects[keys[w.rng.IntN(len(keys))]].DeepCopy()
}

func (w *viewWorld) record(op string, obj *corev1.ConfigMap) {
	key := obj.Namespace + "/" + obj.Name
	w.history[key] = append(w.history[key], fmt.Sprintf("%s rv=%s labels=%v", op, obj.ResourceVersion, obj.Labels))
}

// step writes one random change: create, update data, relabel into and
// out of selectors, or delete.
func (w *viewWorld) step(ctx context.Context) error {
	n := w.rng.IntN(100)
	switch {
	case len(w.objects) == 0, n < 25 && len(w.objects) < viewMaxObjects:
		return w.create(ctx)
	case n < 45:
		obj := w.pick()
		obj.Data = map[string]string{"v": fmt.Sprint(w.rng.Int())}
		return w.update(ctx, "update data", obj)
	case n < 85:
		obj := w.pick()
		switch w.rng.IntN(5) {
		case 0:
			obj.Labels = nil
		case 1:
			obj.Labels = w.randomLabels()
		default:
			if obj.Labels == nil {
				obj.Labels = map[string]string{}
			}
			key := []string{"tier", "app"}[w.rng.IntN(2)]
			if v := w.randomLabels()[key]; v != "" {
				obj.Labels[key] = v
			} else {
				delete(obj.Labels, key)
			}
		}
		return w.update(ctx, "relabel", obj)
	default:
		obj := w.pick()
		if err := w.c.Delete(ctx, obj); err != nil {
			return fmt.Errorf("delete %s/%s: %w", obj.Namespace, obj.Name, err)
		}
		key := obj.Namespace + "/" + obj.Name
		delete(w.objects, key)
		w.deleted = append(w.deleted, key)
		w.record("delete", obj)
		return nil
	}
}

// create makes a ConfigMap, now and then one deleted before under the same
// name.
func (w *viewWorld) create(ctx context.Context) error {
	obj := &corev1.ConfigMap{Data: map[string]string{"v": "0"}}
	obj.Labels = w.randomLabels()
	if len(w.deleted) > 0 && w.rng.IntN(3) == 0 {
		i := w.rng.IntN(len(w.deleted))
		obj.Namespace, obj.Name, _ = strings.Cut(w.deleted[i], "/")
		w.deleted = slices.Delete(w.deleted, i, i+1)
	} else {
		obj.Namespace, obj.Name = w.namespaces[w.rng.IntN(len(w.namespaces))], fmt.Sprintf("cm-%d", w.created)
		w.created++
	}
	if err := w.c.Create(ctx, obj); err != nil {
		return fmt.Errorf("create %s/%s: %w", obj.Namespace, obj.Name, err)
	}
	w.objects[obj.Namespace+"/"+obj.Name] = obj
	w.record("create", obj)
	return nil
}

func (w *viewWorld) update(ctx context.Context, op string, obj *corev1.ConfigMap) error {
	if err := w.c.Update(ctx, obj); err != nil {
		return fmt.Errorf("%s %s/%s: %w", op, obj.Namespace, obj.Name, err)
	}
	w.objects[obj.Namespace+"/"+obj.Name] = obj
	w.record(op, obj)
	return nil
}

// serverList returns what the API server's own LIST with s's spec holds,
// by namespace/name: resourceVersion.
func (w *viewWorld) serverList(ctx context.Context, s *viewStore) (map[string]string, error) {
	opts := &client.ListOptions{
		Namespace: s.spec.Namespace,
		Raw:       &metav1.ListOptions{LabelSelector: s.spec.LabelSelector, FieldSelector: s.spec.FieldSelector},
	}
	var items []client.Object
	if s.metadata {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		if err := w.c.List(ctx, list, opts); err != nil {
			return nil, err
		}
		for i := range list.Items {
			items = append(items, &list.Items[i])
		}
	} else {
		list := &corev1.ConfigMapList{}
		if err := w.c.List(ctx, list, opts); err != nil {
			return nil, err
		}
		for i := range list.Items {
			items = append(items, &list.Items[i])
		}
	}
	return versionsOf(items), nil
}

func versionsOf[T client.Object](objs []T) map[string]string {
	out := make(map[string]string, len(objs))
	for _, o := range objs {
		out[o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
	}
	return out
}

// diff describes how got differs from want, with what was written to each
// object that differs and, if events is not nil, the events it was seen in.
func (w *viewWorld) diff(want, got map[string]string, events func(key string) []string) string {
	var b strings.Builder
	describe := func(k, what string) {
		fmt.Fprintf(&b, "\n  %s: %s; written %q", k, what, w.history[k])
		if events != nil {
			fmt.Fprintf(&b, "; events %q", events(k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			describe(k, "missing, want rv "+want[k])
		} else if g != want[k] {
			describe(k, fmt.Sprintf("rv %s, want rv %s", g, want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			describe(k, "not selected, held at rv "+got[k])
		}
	}
	return b.String()
}

// someOf returns up to n of keys, at random.
func (w *viewWorld) someOf(keys []string, n int) []string {
	slices.Sort(keys)
	w.sample.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys[:min(n, len(keys))]
}

// checkViewStores waits, churn paused, until every store and every
// subscriber holds what the API server's LIST with its spec returns, and
// checks Count and Get.
func checkViewStores(t *testing.T, w *viewWorld, stores []*viewStore, checkpoint string) {
	t.Helper()
	ctx := t.Context()
	for _, s := range stores {
		want, err := w.serverList(ctx, s)
		require.NoError(t, err, "%s: LIST %s", checkpoint, s.store)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			list, err := s.store.List()
			if !assert.NoError(c, err) {
				return
			}
			for _, o := range list {
				_, isMetadata := o.(*metav1.PartialObjectMetadata)
				assert.Equal(c, s.metadata, isMetadata, "%s holds a %T", o.GetName(), o)
			}
			if d := w.diff(want, versionsOf(list), nil); d != "" {
				c.Errorf("List differs from the API server's:%s", d)
			}
			informed := s.store.Informer().GetIndexer().ListKeys()
			assert.ElementsMatch(c, slices.Collect(maps.Keys(want)), informed, "keys of the informer given out")
			if d := w.diff(want, s.sub.replay(), s.sub.eventsOf); d != "" {
				c.Errorf("subscriber's events replay to another set:%s", d)
			}
		}, viewConverge, 20*time.Millisecond, "%s: %s", checkpoint, s.store)
		require.Empty(t, s.sub.violations(), "%s: %s: events no watch would send", checkpoint, s.store)

		count, err := s.store.Count()
		require.NoError(t, err)
		require.Equal(t, len(want), count, "%s: %s: Count", checkpoint, s.store)
		for _, k := range w.someOf(slices.Collect(maps.Keys(want)), 5) {
			ns, name, _ := strings.Cut(k, "/")
			obj, err := s.store.Get(ns, name)
			require.NoError(t, err, "%s: %s: Get %s", checkpoint, s.store, k)
			require.Equal(t, want[k], obj.GetResourceVersion(), "%s: %s: Get %s", checkpoint, s.store, k)
		}
		// Objects the spec does not select, deleted ones and one never made.
		var absent []string
		for k := range w.history {
			if _, ok := want[k]; !ok {
				absent = append(absent, k)
			}
		}
		for _, k := range append(w.someOf(absent, 8), w.namespaces[0]+"/no-such-configmap") {
			ns, name, _ := strings.Cut(k, "/")
			_, err := s.store.Get(ns, name)
			require.True(t, apierrors.IsNotFound(err), "%s: %s: Get %s: want NotFound, got %v", checkpoint, s.store, k, err)
		}
	}
}

// viewSubscriber replays the events it receives onto the objects it
// holds, and records events no watch would send: an add of an object held,
// an update or delete of one not held, an update whose old object is not
// the one held.
type viewSubscriber struct {
	metadata bool

	mu     sync.Mutex
	held   map[string]string // namespace/name: resourceVersion
	log    []string
	broken []string
}

var _ cache.ResourceEventHandler = (*viewSubscriber)(nil)

func (s *viewSubscriber) OnAdd(obj any, _ bool)    { s.apply("add", nil, obj) }
func (s *viewSubscriber) OnUpdate(oldObj, obj any) { s.apply("update", oldObj, obj) }
func (s *viewSubscriber) OnDelete(obj any)         { s.apply("delete", nil, obj) }

func (s *viewSubscriber) apply(op string, oldObj, obj any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = make(map[string]string)
	}
	fail := func(format string, args ...any) {
		s.broken = append(s.broken, fmt.Sprintf("event %d, %s: ", len(s.log), op)+fmt.Sprintf(format, args...))
	}
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok && op == "delete" {
		obj = d.Obj
		if o, ok := obj.(client.Object); ok && d.Key != o.GetNamespace()+"/"+o.GetName() {
			fail("tombstone key %s holds %s/%s", d.Key, o.GetNamespace(), o.GetName())
		}
	}
	o, ok := obj.(client.Object)
	if !ok {
		fail("%T is not an object", obj)
		return
	}
	if _, isMetadata := o.(*metav1.PartialObjectMetadata); isMetadata != s.metadata {
		fail("got a %T", o)
	}
	key, rv := o.GetNamespace()+"/"+o.GetName(), o.GetResourceVersion()
	s.log = append(s.log, op+" "+key+" "+rv)
	held, isHeld := s.held[key]
	switch op {
	case "add":
		if isHeld {
			fail("%s rv %s is held already, at rv %s", key, rv, held)
		}
		s.held[key] = rv
	case "update":
		old, ok := oldObj.(client.Object)
		switch {
		case !isHeld:
			fail("%s rv %s is not held", key, rv)
		case !ok || old.GetNamespace()+"/"+old.GetName() != key:
			fail("old object %v is not %s", oldObj, key)
		case old.GetResourceVersion() != held:
			fail("%s: old object at rv %s, held at rv %s", key, old.GetResourceVersion(), held)
		}
		s.held[key] = rv
	case "delete":
		if !isHeld {
			fail("%s rv %s is not held", key, rv)
		}
		delete(s.held, key)
	}
}

func (s *viewSubscriber) replay() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.held)
}

func (s *viewSubscriber) violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.broken)
}

// eventsOf returns the events of the object with key.
func (s *viewSubscriber) eventsOf(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.log {
		if strings.Contains(e, " "+key+" ") {
			out = append(out, e)
		}
	}
	return out
}

func (s *viewSubscriber) events() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.log)
}

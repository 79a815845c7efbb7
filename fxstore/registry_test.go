package fxstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var configMapKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

func byApp(cm *corev1.ConfigMap) []string { return []string{cm.Labels["app"]} }

func otherByApp(cm *corev1.ConfigMap) []string { return nil }

func TestForSharesOneInformerPerKey(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	a, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "app=web,tier=front"})
	require.NoError(t, err)
	b, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: " tier=front, app==web"})
	require.NoError(t, err)
	c, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "app=web"})
	require.NoError(t, err)
	m, err := fxstore.For[*metav1.PartialObjectMetadata](r, fxstore.Spec{Kind: configMapKind, LabelSelector: "app=web"})
	require.NoError(t, err)
	u, err := fxstore.For[*unstructured.Unstructured](r, fxstore.Spec{Kind: configMapKind}, fxstore.WithConsumer("dynamic"))
	require.NoError(t, err)

	assert.Same(t, a.Informer(), b.Informer(), "equivalent specs share an informer")
	assert.Equal(t, a.Key(), b.Key())
	assert.NotSame(t, a.Informer(), c.Informer())
	assert.NotSame(t, c.Informer(), m.Informer(), "metadata-only is a different projection")
	assert.Equal(t, `ConfigMap/v1 (all namespaces, labels "app=web,tier=front")`, a.Key().String())
	assert.Equal(t, `ConfigMap/v1 (all namespaces, labels "app=web", metadata-only)`, m.Key().String())
	assert.Equal(t, `ConfigMap/v1 (all namespaces, unstructured)`, u.Key().String())

	infos := r.Stores()
	require.Len(t, infos, 4)
	assert.Equal(t, 5, r.Requests())
	assert.Equal(t, []string{"fxstore_test.TestForSharesOneInformerPerKey", "fxstore_test.TestForSharesOneInformerPerKey"}, infos[0].Consumers)
	assert.Equal(t, []string{"dynamic"}, infos[3].Consumers)
}

func TestForRejectsBadInput(t *testing.T) {
	type widget struct{ corev1.ConfigMap }
	tests := []struct {
		name    string
		ask     func(r *fxstore.Registry) error
		wantErr []string
	}{
		{
			name: "invalid label selector",
			ask: func(r *fxstore.Registry) error {
				_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "app=("})
				return err
			},
			wantErr: []string{`store ConfigMap/v1 (all namespaces, labels "app=(")`, "invalid label selector", "requested by fxstore_test."},
		},
		{
			name: "invalid field selector",
			ask: func(r *fxstore.Registry) error {
				_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{FieldSelector: "metadata.name"})
				return err
			},
			wantErr: []string{"invalid field selector"},
		},
		{
			name: "invalid namespace",
			ask: func(r *fxstore.Registry) error {
				_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "Not_A_Namespace"})
				return err
			},
			wantErr: []string{`invalid namespace "Not_A_Namespace"`},
		},
		{
			name: "type not in scheme",
			ask: func(r *fxstore.Registry) error {
				_, err := fxstore.For[*widget](r, fxstore.Spec{})
				return err
			},
			wantErr: []string{"is not in the scheme", "fxstore.AddToScheme"},
		},
		{
			name: "kind disagrees with type",
			ask: func(r *fxstore.Registry) error {
				_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Kind: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}})
				return err
			},
			wantErr: []string{"does not match", "ConfigMap/v1"},
		},
		{
			name: "unstructured without kind",
			ask: func(r *fxstore.Registry) error {
				_, err := fxstore.For[*unstructured.Unstructured](r, fxstore.Spec{})
				return err
			},
			wantErr: []string{"kind and version are required; set Spec.Kind"},
		},
		{
			name: "metadata without kind",
			ask: func(r *fxstore.Registry) error {
				_, err := fxstore.For[*metav1.PartialObjectMetadata](r, fxstore.Spec{})
				return err
			},
			wantErr: []string{"kind and version are required"},
		},
		{
			name: "conflicting indexes",
			ask: func(r *fxstore.Registry) error {
				if _, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.WithIndex("app", byApp)); err != nil {
					return err
				}
				_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.WithIndex("app", otherByApp))
				return err
			},
			wantErr: []string{`index "app" is already defined with another function`},
		},
		{
			name: "index of another type",
			ask: func(r *fxstore.Registry) error {
				_, err := fxstore.For[*appsv1.Deployment](r, fxstore.Spec{}, fxstore.WithIndex("app", byApp))
				return err
			},
			wantErr: []string{`index "app" takes *v1.ConfigMap but the store holds *v1.Deployment`},
		},
		{
			name: "unnamed transform",
			ask: func(r *fxstore.Registry) error {
				_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Transform: fxstore.Transform{Func: func(o any) (any, error) { return o, nil }}})
				return err
			},
			wantErr: []string{"transform has a function but no name"},
		},
		{
			name: "conflicting transforms",
			ask: func(r *fxstore.Registry) error {
				_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Transform: fxstore.Transform{Name: fxstore.StripManagedFields.Name}})
				return err
			},
			wantErr: []string{`transform "strip-managed-fields" is already defined with another function`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fxstore.NewRegistry(clientgoscheme.Scheme)
			_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
			require.NoError(t, err)
			err = tt.ask(r)
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestStoreReads(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	web, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "app in (web,api)"}, fxstore.WithIndex("app", byApp))
	require.NoError(t, err)
	src := fxstoretest.NewSource(clientgoscheme.Scheme,
		testenv.ConfigMap("a", "web", testenv.Labels{"app": "web"}),
		testenv.ConfigMap("b", "web", testenv.Labels{"app": "web"}),
		testenv.ConfigMap("b", "api", testenv.Labels{"app": "api", "tier": "back"}),
		testenv.ConfigMap("b", "db", testenv.Labels{"app": "db"}),
	)

	release := src.HoldLists()
	require.NoError(t, r.Start(t.Context(), src))
	t.Cleanup(r.Stop)

	_, err = web.Get("a", "web")
	require.ErrorIs(t, err, fxstore.ErrNotSynced, "reads before sync fail rather than return a partial answer")
	_, err = web.List()
	require.ErrorIs(t, err, fxstore.ErrNotSynced)
	_, err = web.Count()
	require.ErrorIs(t, err, fxstore.ErrNotSynced)
	assert.False(t, web.HasSynced())
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, web.WaitForSync(ctx), context.DeadlineExceeded)

	release()
	require.NoError(t, web.WaitForSync(t.Context()))

	got, err := web.Get("b", "api")
	require.NoError(t, err)
	assert.Equal(t, "api", got.Name)
	_, err = web.Get("b", "db")
	require.True(t, apierrors.IsNotFound(err), "a miss is NotFound, got %v", err)
	assert.Contains(t, err.Error(), `configmaps "db" not found`)

	all, err := web.List()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a/web", "b/web", "b/api"}, names(all))
	inB, err := web.List(client.InNamespace("b"))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"b/web", "b/api"}, names(inB))
	back, err := web.List(client.MatchingLabels{"tier": "back"})
	require.NoError(t, err)
	assert.Equal(t, []string{"b/api"}, names(back))
	_, err = web.List(client.MatchingFields{"metadata.name": "x"})
	require.ErrorContains(t, err, "use ByIndex")

	webs, err := web.ByIndex("app", "web")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a/web", "b/web"}, names(webs))
	_, err = web.ByIndex("nope", "web")
	require.ErrorContains(t, err, "declare it with fxstore.WithIndex")

	n, err := web.Count()
	require.NoError(t, err)
	assert.Equal(t, 3, n)
}

func TestStoreFollowsChanges(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	web, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a", LabelSelector: "app=web"})
	require.NoError(t, err)
	meta, err := fxstore.For[*metav1.PartialObjectMetadata](r, fxstore.Spec{Kind: configMapKind})
	require.NoError(t, err)
	src := fxstoretest.NewSource(clientgoscheme.Scheme)
	fxstoretest.Start(t, r, src)
	ctx := t.Context()
	c := src.Client()

	cm := testenv.ConfigMap("a", "x", testenv.Labels{"app": "web"}, testenv.Data{"k": "1"})
	require.NoError(t, c.Create(ctx, cm))
	require.NoError(t, c.Create(ctx, testenv.ConfigMap("b", "x", testenv.Labels{"app": "web"})))
	eventually(t, func() bool { n, _ := web.Count(); m, _ := meta.Count(); return n == 1 && m == 2 })
	got, err := meta.Get("b", "x")
	require.NoError(t, err)
	assert.Equal(t, configMapKind, got.GroupVersionKind(), "metadata-only objects carry their kind")

	cm.Data["k"] = "2"
	require.NoError(t, c.Update(ctx, cm))
	eventually(t, func() bool { o, err := web.Get("a", "x"); return err == nil && o.Data["k"] == "2" })

	cm.Labels["app"] = "other"
	require.NoError(t, c.Update(ctx, cm))
	eventually(t, func() bool { _, err := web.Get("a", "x"); return apierrors.IsNotFound(err) })

	require.NoError(t, c.Delete(ctx, cm))
	eventually(t, func() bool { n, _ := meta.Count(); return n == 1 })
}

func TestSubscribe(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	store, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	src := fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("a", "one"), testenv.ConfigMap("a", "two"))
	fxstoretest.Start(t, r, src)

	events := make(chan string, 10)
	sub, err := store.Subscribe(fxstore.HandlerFuncs[*corev1.ConfigMap]{
		AddFunc:    func(cm *corev1.ConfigMap, initial bool) { events <- "add " + cm.Name },
		UpdateFunc: func(_, cm *corev1.ConfigMap) { events <- "update " + cm.Name },
		DeleteFunc: func(cm *corev1.ConfigMap) { events <- "delete " + cm.Name },
	})
	require.NoError(t, err)
	require.NoError(t, sub.WaitForSync(t.Context()))
	assert.True(t, sub.HasSynced())
	assert.ElementsMatch(t, []string{"add one", "add two"}, []string{<-events, <-events}, "a late subscriber first gets the current contents")

	require.NoError(t, src.Client().Delete(t.Context(), testenv.ConfigMap("a", "one")))
	assert.Equal(t, "delete one", <-events)

	require.NoError(t, sub.Unsubscribe())
	require.NoError(t, sub.Unsubscribe(), "unsubscribing twice is fine")
	require.NoError(t, src.Client().Create(t.Context(), testenv.ConfigMap("a", "three")))
	eventually(t, func() bool { n, _ := store.Count(); return n == 2 })
	select {
	case e := <-events:
		t.Fatalf("unsubscribed handler got %q", e)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestWaitForSyncNamesUnsyncedStores(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "slow"})
	require.NoError(t, err)
	src := fxstoretest.NewSource(clientgoscheme.Scheme)
	release := src.HoldLists()
	defer release()
	require.NoError(t, r.Start(t.Context(), src))
	defer r.Stop()

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err = r.WaitForSync(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var se *fxstore.StoreError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), `store ConfigMap/v1 (namespace "slow"): not synced; no list/watch error reported`)
	assert.False(t, r.Stores()[0].Status.Synced)
}

// A store requested while WaitForSync waits (a controller warming up asks
// for its stores then) is waited for and named when the wait times out.
func TestWaitForSyncNamesStoresRequestedWhileWaiting(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	src := fxstoretest.NewSource(clientgoscheme.Scheme)
	release := src.HoldLists()
	defer release()
	require.NoError(t, r.Start(t.Context(), src))
	defer r.Stop()
	warmedUp := r.Delay("warm-up")
	defer warmedUp()

	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- r.WaitForSync(ctx) }()
	time.Sleep(50 * time.Millisecond) // WaitForSync waits on the delay
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "late"})
	require.NoError(t, err)
	err = <-waited
	require.ErrorIs(t, err, context.DeadlineExceeded, "the store requested while waiting is waited for")
	assert.Contains(t, err.Error(), `1 of 1 stores not synced`)
	assert.Contains(t, err.Error(), `store ConfigMap/v1 (namespace "late"): not synced`)
	assert.Contains(t, err.Error(), `warm-up: not done`)
}

func TestStartRejectsUnbindableStores(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{FieldSelector: "data.x=1"})
	require.NoError(t, err)
	_, err = fxstore.For[*corev1.Secret](r, fxstore.Spec{FieldSelector: "type=Opaque"})
	require.NoError(t, err)
	err = r.Start(t.Context(), fxstoretest.NewSource(clientgoscheme.Scheme))
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 2, "one line per failing store: %v", err)
	assert.Contains(t, lines[0], `store ConfigMap/v1 (all namespaces, fields "data.x=1")`)
	assert.Contains(t, lines[1], `store Secret/v1 (all namespaces, fields "type=Opaque")`)
	require.ErrorContains(t, r.Start(t.Context(), fxstoretest.NewSource(clientgoscheme.Scheme)), "already started")
	r.Stop()
}

func TestForAfterStartStartsLate(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	src := fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("a", "x"))
	early, err := fxstore.For[*corev1.Secret](r, fxstore.Spec{})
	require.NoError(t, err)
	fxstoretest.Start(t, r, src)
	require.True(t, early.HasSynced())

	late, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.WithConsumer("reconciler"))
	require.NoError(t, err)
	require.NoError(t, r.WaitForStore(t.Context(), late.Key()))
	got, err := late.Get("a", "x")
	require.NoError(t, err)
	assert.Equal(t, "x", got.Name)

	infos := r.Stores()
	require.Len(t, infos, 2)
	assert.False(t, infos[0].Late, "started with the registry")
	assert.True(t, infos[1].Late, "started after every store had synced")
	assert.Equal(t, []string{"reconciler"}, infos[1].Consumers)

	again, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	assert.Equal(t, late.Key(), again.Key(), "a later request shares the late store")
	assert.Len(t, r.Stores(), 2)
}

func TestLateStoreThatCannotBindFailsWaits(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	fxstoretest.Start(t, r, fxstoretest.NewSource(clientgoscheme.Scheme))
	late, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{FieldSelector: "data.x=1"})
	require.NoError(t, err)
	// The failure is permanent: both waits return at once, not at the
	// context's deadline.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = r.WaitForStore(ctx, late.Key())
	require.ErrorContains(t, err, `store ConfigMap/v1 (all namespaces, fields "data.x=1"): cannot start: fxstoretest: field "data.x" cannot be selected on the client`)
	require.ErrorContains(t, r.WaitForSync(ctx), `fields "data.x=1"`)
	require.NoError(t, ctx.Err())
}

// failingFirst fails the first binding of each store, as an API server
// would before a CRD is installed or an RBAC rule granted.
type failingFirst struct {
	*fxstoretest.Source
	mu     sync.Mutex
	failed map[fxstore.Key]bool
}

func (f *failingFirst) Bind(ctx context.Context, key fxstore.Key) (fxstore.Binding, error) {
	f.mu.Lock()
	first := !f.failed[key]
	f.failed[key] = true
	f.mu.Unlock()
	if first {
		return fxstore.Binding{}, apiserver.ErrKindNotServed
	}
	return f.Source.Bind(ctx, key)
}

// A late store that could not start is tried again when waited for.
func TestLateStoreIsRetriedWhenWaitedFor(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	src := &failingFirst{Source: fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("a", "x")), failed: map[fxstore.Key]bool{}}
	require.NoError(t, r.Start(t.Context(), src))
	t.Cleanup(r.Stop)
	require.NoError(t, r.WaitForSync(t.Context()))

	late, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return r.Stores()[0].Status.LastError != nil }, 5*time.Second, time.Millisecond)
	require.NoError(t, r.WaitForStore(t.Context(), late.Key()), "the second attempt starts it")
	_, err = late.Get("a", "x")
	require.NoError(t, err)
}

func TestForAfterStopFails(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	require.NoError(t, r.Start(t.Context(), fxstoretest.NewSource(clientgoscheme.Scheme)))
	r.Stop()
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.ErrorContains(t, err, "the registry has stopped")
}

func TestDelayHoldsWaitForSync(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	require.NoError(t, r.Start(t.Context(), fxstoretest.NewSource(clientgoscheme.Scheme)))
	t.Cleanup(r.Stop)
	release := r.Delay(`controller "task" warming up`)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := r.WaitForSync(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), `controller "task" warming up: not done`)

	done := make(chan error, 1)
	go func() { done <- r.WaitForSync(t.Context()) }()
	release()
	release() // again: nothing
	require.NoError(t, <-done)
}

func TestAddToScheme(t *testing.T) {
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	add := func(s *k8sruntime.Scheme) error {
		s.AddKnownTypeWithName(gv.WithKind("Widget"), &corev1.ConfigMap{})
		return nil
	}
	scheme, err := fxstore.NewScheme(add)
	require.NoError(t, err)
	assert.True(t, scheme.Recognizes(gv.WithKind("Widget")))
	assert.True(t, scheme.Recognizes(configMapKind), "built-in types are always there")

	_, err = fxstore.NewScheme(func(*k8sruntime.Scheme) error { return errors.New("boom") })
	require.ErrorContains(t, err, "build scheme: boom")
}

func names[T client.Object](objs []T) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.GetNamespace() + "/" + o.GetName()
	}
	return out
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 5*time.Millisecond)
}

var _ cache.ResourceEventHandler = fxstore.HandlerFuncs[*corev1.ConfigMap]{}

// flakySource fails the first lists of its stores with 503, as an API server
// that is briefly unavailable does.
type flakySource struct {
	*fxstoretest.Source
	fails atomic.Int32
}

func (s *flakySource) Bind(ctx context.Context, key fxstore.Key) (fxstore.Binding, error) {
	b, err := s.Source.Bind(ctx, key)
	b.ListerWatcher = flakyListerWatcher{ListerWatcher: b.ListerWatcher, fails: &s.fails}
	return b, err
}

type flakyListerWatcher struct {
	cache.ListerWatcher
	fails *atomic.Int32
}

func (lw flakyListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (k8sruntime.Object, error) {
	if lw.fails.Add(-1) >= 0 {
		return nil, apierrors.NewServiceUnavailable("injected")
	}
	return cache.ToListerWatcherWithContext(lw.ListerWatcher).ListWithContext(ctx, opts)
}

func (lw flakyListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return cache.ToListerWatcherWithContext(lw.ListerWatcher).WatchWithContext(ctx, opts)
}

func (flakyListerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// A store whose list fails and then succeeds counts the failure, and reports
// no error once it has recovered.
func TestStoreErrorClearsOnRecovery(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	s, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	src := &flakySource{Source: fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("ns", "a"))}
	src.fails.Store(1)
	require.NoError(t, r.Start(t.Context(), src))
	defer r.Stop()
	require.NoError(t, r.WaitForSync(t.Context()), "503 is worth retrying")
	n, err := s.Count()
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	assert.NoError(t, r.Stores()[0].Status.LastError)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(r))
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() == "fxkube_store_list_watch_errors_total" {
			assert.Equal(t, 1.0, f.GetMetric()[0].GetCounter().GetValue())
		}
	}
}

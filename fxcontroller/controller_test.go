package fxcontroller_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var scheme = clientgoscheme.Scheme

func request(namespace, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: namespace, Name: name}}
}

// env is a registry of stores on an in-memory source.
type env struct {
	reg *fxstore.Registry
	src *fxstoretest.Source
}

func newEnv(objs ...client.Object) *env {
	return &env{reg: fxstore.NewRegistry(scheme), src: fxstoretest.NewSource(scheme, objs...)}
}

func (e *env) configMaps(t *testing.T) *fxstore.Store[*corev1.ConfigMap] {
	t.Helper()
	s, err := fxstore.For[*corev1.ConfigMap](e.reg, fxstore.Spec{})
	require.NoError(t, err)
	return s
}

// start starts the stores, then runs each controller until the test ends;
// the controllers stop before the stores.
func (e *env) start(t *testing.T, controllers ...*fxcontroller.Controller) {
	t.Helper()
	fxstoretest.Start(t, e.reg, e.src)
	for _, c := range controllers {
		run(t, c)
	}
}

// run runs c until the test ends, and checks that it stops cleanly.
func run(t *testing.T, c *fxcontroller.Controller) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "Start of %s", c)
		case <-time.After(10 * time.Second):
			t.Errorf("%s did not stop", c)
		}
	})
}

// counter counts reconciles per request.
type counter struct {
	mu    sync.Mutex
	calls map[reconcile.Request][]time.Time
	seen  chan reconcile.Request
}

func newCounter() *counter {
	return &counter{calls: make(map[reconcile.Request][]time.Time), seen: make(chan reconcile.Request, 100)}
}

func (c *counter) add(req reconcile.Request) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[req] = append(c.calls[req], time.Now())
	select {
	case c.seen <- req:
	default:
	}
	return len(c.calls[req])
}

func (c *counter) times(req reconcile.Request) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.calls[req]...)
}

func (c *counter) count(req reconcile.Request) int { return len(c.times(req)) }

// metric returns the value of a controller-runtime counter for a controller,
// or 0 if it has none yet. Counters outlive controllers, and tests may run
// more than once (-count), so tests compare values before and after.
func metric(t *testing.T, name, controller string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestNewRejectsBadInput(t *testing.T) {
	e := newEnv()
	cms := e.configMaps(t)
	ok := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	var nilStore *fxstore.Store[*corev1.ConfigMap]
	var nilFunc reconcile.Func

	tests := []struct {
		name       string
		give       string
		store      *fxstore.Store[*corev1.ConfigMap]
		reconciler reconcile.Reconciler
		opts       []fxcontroller.Option
		want       []string
	}{
		{name: "empty name", give: "", store: cms, reconciler: ok, want: []string{`controller "": name is empty`}},
		{name: "invalid name", give: "no spaces", store: cms, reconciler: ok, want: []string{`controller "no spaces": invalid name`}},
		{name: "nil store", give: "c", store: nilStore, reconciler: ok, want: []string{"primary store is nil"}},
		{name: "nil reconciler", give: "c", store: cms, reconciler: nil, want: []string{"reconciler is nil"}},
		{name: "nil reconcile.Func", give: "c", store: cms, reconciler: nilFunc, want: []string{"reconciler is nil"}},
		{
			name: "nil watched store", give: "c", store: cms, reconciler: ok,
			opts: []fxcontroller.Option{fxcontroller.Watches(nilStore, &handler.EnqueueRequestForObject{})},
			want: []string{"Watches: store is nil"},
		},
		{
			name: "nil handler", give: "c", store: cms, reconciler: ok,
			opts: []fxcontroller.Option{fxcontroller.Watches(cms, nil)},
			want: []string{"Watches(ConfigMap/v1 (all namespaces)): handler is nil"},
		},
		{
			name: "zero concurrency", give: "c", store: cms, reconciler: ok,
			opts: []fxcontroller.Option{fxcontroller.WithMaxConcurrentReconciles(0)},
			want: []string{"WithMaxConcurrentReconciles(0): must be at least 1"},
		},
		{
			name: "nil rate limiter", give: "c", store: cms, reconciler: ok,
			opts: []fxcontroller.Option{fxcontroller.WithRateLimiter(nil)},
			want: []string{"WithRateLimiter: rate limiter is nil"},
		},
		{
			name: "nil logger", give: "c", store: cms, reconciler: ok,
			opts: []fxcontroller.Option{fxcontroller.WithLogger(nil)},
			want: []string{"WithLogger: logger is nil"},
		},
		{
			name: "write without resource or verbs", give: "c", store: cms, reconciler: ok,
			opts: []fxcontroller.Option{fxcontroller.Writes(schema.GroupResource{})},
			want: []string{"resource is empty", "no verbs"},
		},
		{
			name: "bad verb", give: "c", store: cms, reconciler: ok,
			opts: []fxcontroller.Option{fxcontroller.Writes(corev1.Resource("configmaps"), "update,patch")},
			want: []string{`invalid verb "update,patch"`},
		},
		{
			name: "one setting twice", give: "c", store: cms, reconciler: ok,
			opts: []fxcontroller.Option{fxcontroller.WithMaxConcurrentReconciles(2), fxcontroller.WithMaxConcurrentReconciles(3)},
			want: []string{"fxcontroller.WithMaxConcurrentReconciles(2) and fxcontroller.WithMaxConcurrentReconciles(3) each set the concurrent reconciles; give one"},
		},
		{
			name: "every problem at once", give: "", store: nilStore, reconciler: nil,
			opts: []fxcontroller.Option{fxcontroller.WithMaxConcurrentReconciles(-1)},
			want: []string{"name is empty", "primary store is nil", "reconciler is nil", "must be at least 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := fxcontroller.New(tt.give, tt.store, tt.reconciler, tt.opts...)
			require.Error(t, err)
			assert.Nil(t, c)
			for _, want := range tt.want {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}

func TestInfo(t *testing.T) {
	e := newEnv()
	cms := e.configMaps(t)
	secrets, err := fxstore.For[*corev1.Secret](e.reg, fxstore.Spec{Namespace: "web"})
	require.NoError(t, err)
	noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })

	c, err := fxcontroller.New("example.com/info", cms, noop,
		fxcontroller.Watches(secrets, &handler.EnqueueRequestForObject{}),
		fxcontroller.Writes(corev1.Resource("configmaps"), "update", "patch", "update"),
		fxcontroller.WithLeaderElection(false),
	)
	require.NoError(t, err)

	assert.Equal(t, "example.com/info", c.Name())
	assert.Equal(t, `controller "example.com/info" of ConfigMap/v1 (all namespaces)`, c.String())
	assert.False(t, c.NeedLeaderElection())
	assert.Equal(t, fxcontroller.Info{
		Name:       "example.com/info",
		DeclaredBy: "fxcontroller_test.TestInfo",
		Primary:    cms.Key(),
		Secondary:  []fxstore.Key{secrets.Key()},
		Writes:     []fxcontroller.Write{{Resource: corev1.Resource("configmaps"), Verbs: []string{"patch", "update"}}},
	}, c.Info())
	assert.Equal(t, "configmaps (patch,update)", c.Info().Writes[0].String())

	c, err = fxcontroller.New("leader", cms, noop)
	require.NoError(t, err)
	assert.True(t, c.NeedLeaderElection(), "controllers run on the leader by default")
}

func TestReconcilesPrimaryObjects(t *testing.T) {
	e := newEnv(testenv.ConfigMap("a", "old"), testenv.ConfigMap("a", "ignored", testenv.Labels{"skip": "true"}))
	calls := newCounter()
	c, err := fxcontroller.New("primary", e.configMaps(t),
		reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			calls.add(req)
			return reconcile.Result{}, nil
		}),
		fxcontroller.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()["skip"] == "" })),
	)
	require.NoError(t, err)
	e.start(t, c)

	assert.Equal(t, request("a", "old"), <-calls.seen, "objects held when the controller starts are reconciled")
	require.NoError(t, e.src.Client().Create(t.Context(), testenv.ConfigMap("a", "new")))
	assert.Equal(t, request("a", "new"), <-calls.seen, "new objects are reconciled")

	cm := testenv.ConfigMap("a", "old", testenv.Labels{"changed": "yes"})
	require.NoError(t, e.src.Client().Patch(t.Context(), cm, client.Merge))
	assert.Equal(t, request("a", "old"), <-calls.seen, "changed objects are reconciled")
	assert.Zero(t, calls.count(request("a", "ignored")), "predicates filter the primary store")
}

func TestWatchesMapsSecondaryObjects(t *testing.T) {
	// Secrets are reconciled when the ConfigMap of the same name changes.
	e := newEnv(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "s"}})
	secrets, err := fxstore.For[*corev1.Secret](e.reg, fxstore.Spec{})
	require.NoError(t, err)
	calls := newCounter()
	sameName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{request(o.GetNamespace(), o.GetName())}
	})
	c, err := fxcontroller.New("secondary", secrets,
		reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			calls.add(req)
			return reconcile.Result{}, nil
		}),
		fxcontroller.Watches(e.configMaps(t), sameName,
			predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() != "filtered" })),
	)
	require.NoError(t, err)
	e.start(t, c)
	assert.Equal(t, request("a", "s"), <-calls.seen)

	require.NoError(t, e.src.Client().Create(t.Context(), testenv.ConfigMap("a", "filtered")))
	require.NoError(t, e.src.Client().Create(t.Context(), testenv.ConfigMap("b", "t")))
	assert.Equal(t, request("b", "t"), <-calls.seen, "a secondary change enqueues the primary key it maps to")
	assert.Zero(t, calls.count(request("a", "filtered")), "predicates filter the secondary store")
}

func TestWatchesOwners(t *testing.T) {
	owner := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "owner", UID: "uid-1"}}
	e := newEnv(owner)
	secrets, err := fxstore.For[*corev1.Secret](e.reg, fxstore.Spec{})
	require.NoError(t, err)
	calls := newCounter()
	c, err := fxcontroller.New("owners", secrets,
		reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			calls.add(req)
			return reconcile.Result{}, nil
		}),
		fxcontroller.Watches(e.configMaps(t), handler.EnqueueRequestForOwner(
			scheme, testrestmapper.TestOnlyStaticRESTMapper(scheme), &corev1.Secret{}, handler.OnlyControllerOwner())),
	)
	require.NoError(t, err)
	e.start(t, c)
	assert.Equal(t, request("a", "owner"), <-calls.seen)

	owned := testenv.ConfigMap("a", "owned")
	owned.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Secret", Name: "owner", UID: "uid-1", Controller: new(true),
	}}
	require.NoError(t, e.src.Client().Create(t.Context(), owned))
	assert.Equal(t, request("a", "owner"), <-calls.seen, "a change to an owned object enqueues its owner")
}

func TestRequeueAfter(t *testing.T) {
	e := newEnv(testenv.ConfigMap("a", "x"))
	const after = 200 * time.Millisecond
	calls := newCounter()
	c, err := fxcontroller.New("requeue-after", e.configMaps(t),
		reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			if calls.add(req) == 1 {
				return reconcile.Result{RequeueAfter: after}, nil
			}
			return reconcile.Result{}, nil
		}))
	require.NoError(t, err)
	e.start(t, c)

	<-calls.seen
	<-calls.seen
	times := calls.times(request("a", "x"))
	require.Len(t, times, 2)
	assert.GreaterOrEqual(t, times[1].Sub(times[0]), after, "the request comes back no sooner than RequeueAfter")
}

func TestTerminalErrorsAreNotRetried(t *testing.T) {
	e := newEnv(testenv.ConfigMap("a", "terminal"), testenv.ConfigMap("a", "transient"))
	calls := newCounter()
	c, err := fxcontroller.New("terminal", e.configMaps(t),
		reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			n := calls.add(req)
			if req.Name == "terminal" {
				return reconcile.Result{}, reconcile.TerminalError(errors.New("spec is invalid"))
			}
			if n < 3 {
				return reconcile.Result{}, errors.New("try again")
			}
			return reconcile.Result{}, nil
		}),
		fxcontroller.WithRateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Millisecond, 10*time.Millisecond)),
	)
	require.NoError(t, err)
	terminal := metric(t, "controller_runtime_terminal_reconcile_errors_total", "terminal")
	all := metric(t, "controller_runtime_reconcile_errors_total", "terminal")
	e.start(t, c)

	require.Eventually(t, func() bool { return calls.count(request("a", "transient")) == 3 }, 5*time.Second, time.Millisecond,
		"other errors are retried, at the rate limiter's pace")
	// The transient request was retried twice meanwhile; the terminal one
	// would have been too.
	assert.Equal(t, 1, calls.count(request("a", "terminal")), "a terminal error is not retried")
	assert.Equal(t, 1.0, metric(t, "controller_runtime_terminal_reconcile_errors_total", "terminal")-terminal)
	assert.Equal(t, 3.0, metric(t, "controller_runtime_reconcile_errors_total", "terminal")-all)
}

func TestPanicsAreRecovered(t *testing.T) {
	e := newEnv(testenv.ConfigMap("a", "x"))
	calls := newCounter()
	c, err := fxcontroller.New("panics", e.configMaps(t),
		reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			if calls.add(req) == 1 {
				panic("reconciler bug")
			}
			return reconcile.Result{}, nil
		}))
	require.NoError(t, err)
	panics := metric(t, "controller_runtime_reconcile_panics_total", "panics")
	errs := metric(t, "controller_runtime_reconcile_errors_total", "panics")
	e.start(t, c)

	<-calls.seen
	<-calls.seen // the panic was recovered as an error, and retried
	assert.Equal(t, 1.0, metric(t, "controller_runtime_reconcile_panics_total", "panics")-panics)
	assert.Equal(t, 1.0, metric(t, "controller_runtime_reconcile_errors_total", "panics")-errs)

	// Calling Reconcile directly recovers too.
	_, err = c.Reconcile(t.Context(), request("a", "y"))
	require.ErrorContains(t, err, "panic: reconciler bug [recovered]")
	assert.Equal(t, 2.0, metric(t, "controller_runtime_reconcile_panics_total", "panics")-panics)
	_, err = c.Reconcile(t.Context(), request("a", "y"))
	require.NoError(t, err)
}

func TestMaxConcurrentReconciles(t *testing.T) {
	const workers, objects = 3, 7
	var objs []client.Object
	for i := range objects {
		objs = append(objs, testenv.ConfigMap("a", string(rune('a'+i))))
	}
	e := newEnv(objs...)
	var running, peak, done atomic.Int32
	release := make(chan struct{})
	c, err := fxcontroller.New("concurrency", e.configMaps(t),
		reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for p := peak.Load(); n > p; p = peak.Load() {
				if peak.CompareAndSwap(p, n) {
					break
				}
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			done.Add(1)
			return reconcile.Result{}, nil
		}),
		fxcontroller.WithMaxConcurrentReconciles(workers))
	require.NoError(t, err)
	e.start(t, c)

	require.Eventually(t, func() bool { return running.Load() == workers }, 5*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond) // room for a fourth, which must not start
	assert.Equal(t, int32(workers), running.Load())
	close(release)
	require.Eventually(t, func() bool { return done.Load() == objects }, 5*time.Second, time.Millisecond)
	assert.Equal(t, int32(workers), peak.Load())
}

func TestReconcileContextCarriesLogger(t *testing.T) {
	e := newEnv(testenv.ConfigMap("a", "x"))
	core, logs := observer.New(zapcore.InfoLevel)
	logged := make(chan struct{})
	var once sync.Once
	c, err := fxcontroller.New("logging", e.configMaps(t),
		reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
			log.FromContext(ctx).Info("from logr")
			fxcontroller.LoggerFrom(ctx).Info("from zap", zap.Int("n", 1))
			once.Do(func() { close(logged) })
			return reconcile.Result{}, nil
		}),
		fxcontroller.WithLogger(zap.New(core).Named("app")))
	require.NoError(t, err)
	e.start(t, c)
	<-logged

	for _, msg := range []string{"from logr", "from zap"} {
		entries := logs.FilterMessage(msg).All()
		require.Len(t, entries, 1, msg)
		assert.Equal(t, "app.logging", entries[0].LoggerName)
		fields := entries[0].ContextMap()
		assert.Equal(t, "logging", fields["controller"])
		assert.Equal(t, "a", fields["namespace"])
		assert.Equal(t, "x", fields["name"])
		assert.Contains(t, fields, "reconcileID", "controller-runtime's own context logger")
	}
	assert.Equal(t, "app.logging", c.Logger().Name())
	assert.Equal(t, zap.NewNop(), fxcontroller.LoggerFrom(t.Context()))
}

func TestStopRemovesHandlers(t *testing.T) {
	e := newEnv(testenv.ConfigMap("a", "x"))
	cms := e.configMaps(t)
	var evaluated atomic.Int32
	reconciled := make(chan struct{}, 1)
	c, err := fxcontroller.New("stops", cms,
		reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			select {
			case reconciled <- struct{}{}:
			default:
			}
			return reconcile.Result{}, nil
		}),
		fxcontroller.WithPredicates(predicate.NewPredicateFuncs(func(client.Object) bool { evaluated.Add(1); return true })))
	require.NoError(t, err)
	fxstoretest.Start(t, e.reg, e.src)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	// Once it reconciles, the controller has started: its source synced.
	// Stopped before, it fails its start with "context canceled".
	select {
	case <-reconciled:
	case <-time.After(5 * time.Second):
		t.Fatal("the controller did not reconcile")
	}
	require.Equal(t, int32(1), evaluated.Load())
	cancel()
	require.NoError(t, <-done)

	// Another subscriber sees the next change; the controller's handler,
	// which ran the predicate, must not.
	updated := make(chan struct{}, 1)
	sub, err := cms.Subscribe(fxstore.HandlerFuncs[*corev1.ConfigMap]{UpdateFunc: func(_, _ *corev1.ConfigMap) { updated <- struct{}{} }})
	require.NoError(t, err)
	defer func() { require.NoError(t, sub.Unsubscribe()) }()
	require.NoError(t, e.src.Client().Patch(t.Context(), testenv.ConfigMap("a", "x", testenv.Labels{"v": "2"}), client.Merge))
	<-updated
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, int32(1), evaluated.Load())

	assert.ErrorContains(t, c.Start(t.Context()), "started more than once", "a controller starts once")
}

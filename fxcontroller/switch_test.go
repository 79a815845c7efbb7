package fxcontroller_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// switchApp is an app of controllers on in-memory stores, under the app's
// lifecycle, with what tests of Switch look at.
type switchApp struct {
	sw    *fxcontroller.Switch
	ctrls fxcontroller.Controllers
	reg   *fxstore.Registry
	src   *fxstoretest.Source
	logs  *observer.ObservedLogs
}

// startSwitchApp starts an app of opts whose stores hold objs; it stops
// when the test ends.
func startSwitchApp(t *testing.T, stopTimeout time.Duration, objs []client.Object, opts ...fx.Option) *switchApp {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	a := &switchApp{logs: logs}
	app := fxtest.New(t,
		fx.Supply(zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Core()))),
		fxstoretest.Module(objs...),
		// The app watches CRDs for controllers that wait for their kinds.
		fxstore.AddToScheme(apiextensionsv1.AddToScheme),
		fxcontroller.Collect,
		fx.Options(opts...),
		fx.Populate(&a.sw, &a.ctrls, &a.reg, &a.src),
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0", StopTimeout: stopTimeout}),
	)
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return a
}

func (a *switchApp) controller(t *testing.T, name string) *fxcontroller.Controller {
	t.Helper()
	i := slices.IndexFunc(a.ctrls, func(c *fxcontroller.Controller) bool { return c.Name() == name })
	require.GreaterOrEqual(t, i, 0, "no controller %q", name)
	return a.ctrls[i]
}

// awaitState waits until the named controller is in state.
func (a *switchApp) awaitState(t *testing.T, name string, state fxcontroller.State) {
	t.Helper()
	c := a.controller(t, name)
	require.Eventually(t, func() bool { return c.Status().State == state }, 10*time.Second, time.Millisecond,
		"controller %q is %s, not %s", name, c.Status(), state)
}

// reconciles records the requests a controller reconciled, by run.
type reconciles struct {
	mu   sync.Mutex
	runs [][]string // names reconciled, per run
}

// add records name in the latest run, which next begins.
func (r *reconciles) add(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.runs) == 0 {
		r.runs = append(r.runs, nil)
	}
	r.runs[len(r.runs)-1] = append(r.runs[len(r.runs)-1], name)
}

// next makes the following reconciles those of a new run.
func (r *reconciles) next() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, nil)
}

// last returns the names reconciled in the latest run, sorted.
func (r *reconciles) last() []string {
	r.mu.Lock()
	n := len(r.runs)
	r.mu.Unlock()
	return r.of(n - 1)
}

// of returns the names reconciled in run, sorted.
func (r *reconciles) of(run int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if run < 0 || run >= len(r.runs) {
		return nil
	}
	return slices.Sorted(slices.Values(r.runs[run]))
}

// provideConfigMaps declares a controller named name of the ConfigMaps of
// namespace, whose reconciles r records, and whose store it puts in
// stores.
func provideConfigMaps(name, namespace string, r reconcile.Reconciler, stores map[string]fxstore.Key, opts ...fxcontroller.Option) fx.Option {
	return fxcontroller.Provide(func(reg *fxstore.Registry) (*fxcontroller.Controller, error) {
		cms, err := fxstore.For[*corev1.ConfigMap](reg, fxstore.Spec{Namespace: namespace}, fxstore.WithConsumer(name))
		if err != nil {
			return nil, err
		}
		if stores != nil {
			stores[name] = cms.Key()
		}
		return fxcontroller.New(name, cms, r, opts...)
	})
}

// recordTo is a reconciler that records each request's name in r.
func recordTo(r *reconciles) reconcile.Reconciler {
	return reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		r.add(req.Name)
		return reconcile.Result{}, nil
	})
}

// A controller disabled while a reconcile is in flight finishes it, with
// its context alive, and reconciles nothing it had queued. Its store,
// asked for in its constructor, stays synced. Enabled, it runs again with
// a new queue, and reconciles every object.
func TestDisableFinishesInFlightAndDropsTheQueue(t *testing.T) {
	var (
		rec      reconciles
		once     sync.Once
		entered  = make(chan struct{})
		release  = make(chan struct{})
		ctxAlive = make(chan error, 1)
		stores   = map[string]fxstore.Key{}
	)
	slow := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(entered)
			<-release
			ctxAlive <- ctx.Err()
		}
		rec.add(req.Name)
		return reconcile.Result{}, nil
	})
	objs := []client.Object{testenv.ConfigMap("x", "a"), testenv.ConfigMap("x", "b"), testenv.ConfigMap("x", "c")}
	a := startSwitchApp(t, time.Minute, objs, provideConfigMaps("slow", "x", slow, stores))
	<-entered // the others wait in the queue: one reconcile at a time

	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, a.sw.Disable(canceled, "slow"), context.Canceled, "a reconcile is in flight: the controller has not stopped")
	require.Eventually(t, func() bool {
		return a.logs.FilterMessage("controller stopping; reconciles in flight finish within the stop timeout").Len() == 1
	},
		10*time.Second, time.Millisecond, "the controller stops anyway")
	assert.Equal(t, fxcontroller.Running, a.controller(t, "slow").Status().State, "until its reconcile in flight has finished")
	close(release)
	require.NoError(t, a.sw.Disable(t.Context(), "slow"))
	require.NoError(t, <-ctxAlive, "the reconcile in flight finished with a live context")
	require.Len(t, rec.of(0), 1, "nothing queued ran after the stop")
	assert.Equal(t, fxcontroller.Disabled, a.controller(t, "slow").Status().State)
	assert.Equal(t, `controller "slow" is disabled`, a.controller(t, "slow").ReadinessNote())
	store := testenv.StoreInfo(t, a.reg, stores["slow"])
	assert.True(t, store.Status.Synced, "the store its constructor asked for stays")
	assert.Equal(t, 3, store.Objects)

	require.NoError(t, a.src.Client().Create(t.Context(), testenv.ConfigMap("x", "d")))
	require.Eventually(t, func() bool { return testenv.StoreInfo(t, a.reg, stores["slow"]).Objects == 4 }, 10*time.Second, time.Millisecond)
	rec.next()
	require.NoError(t, a.sw.Enable("slow"))
	require.Eventually(t, func() bool { return slices.Equal(rec.of(1), []string{"a", "b", "c", "d"}) }, 10*time.Second, time.Millisecond,
		"a new run reconciles every object: %q", rec.of(1))
	assert.Len(t, rec.of(0), 1, "nothing reconciled while disabled")
	assert.Equal(t, fxcontroller.Running, a.controller(t, "slow").Status().State)
	assert.Equal(t, 2.0, testenv.Metric(t, a.ctrls, "fxkube_controller_starts_total", nil))
	assert.Equal(t, 1.0, testenv.Metric(t, a.ctrls, "fxkube_controller_stops_total", map[string]string{"reason": "disabled"}))
	assert.Equal(t, 1, a.logs.FilterMessage("controller stopped").FilterField(zap.String("reason", "disabled")).Len())
}

// A reconcile in flight that does not finish has its context ended once
// the stop timeout has passed; Disable returns then.
func TestDisableBoundsReconcilesInFlight(t *testing.T) {
	const stopTimeout = 200 * time.Millisecond
	entered := make(chan struct{}, 1)
	cause := make(chan error, 1)
	stuck := reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		entered <- struct{}{}
		<-ctx.Done()
		cause <- ctx.Err()
		return reconcile.Result{}, nil
	})
	a := startSwitchApp(t, stopTimeout, []client.Object{testenv.ConfigMap("x", "a")}, provideConfigMaps("stuck", "x", stuck, nil))
	<-entered
	begin := time.Now()
	require.NoError(t, a.sw.Disable(t.Context(), "stuck"))
	took := time.Since(begin)
	require.Error(t, <-cause, "the reconcile's context ended")
	// A lower bound only: a loaded machine makes it longer, never shorter.
	assert.GreaterOrEqual(t, took, stopTimeout, "the reconcile in flight had the stop timeout to finish")
	t.Logf("Disable returned %s after it was called, with a stop timeout of %s", took.Round(time.Millisecond), stopTimeout)
}

// Disabled, a controller that waits for its kinds gives back its stores:
// one no other controller holds stops, one another holds stays. Enabled,
// it serves them again and reconciles every object.
func TestDisableReleasesStoresNobodyElseNeeds(t *testing.T) {
	var recA, recB, recOwn reconciles
	stores := map[string]fxstore.Key{}
	objs := []client.Object{testenv.ConfigMap("shared", "s1"), testenv.ConfigMap("shared", "s2"), testenv.ConfigMap("own", "o1")}
	a := startSwitchApp(t, time.Minute, objs,
		provideConfigMaps("a", "shared", recordTo(&recA), stores, fxcontroller.WhenServed()),
		provideConfigMaps("b", "shared", recordTo(&recB), stores, fxcontroller.WhenServed()),
		provideConfigMaps("own", "own", recordTo(&recOwn), stores, fxcontroller.WhenServed()),
	)
	for _, name := range []string{"a", "b", "own"} {
		a.awaitState(t, name, fxcontroller.Running)
	}
	require.Equal(t, stores["a"], stores["b"], "a and b share a store")
	require.Eventually(t, func() bool { return len(recA.of(0)) == 2 && len(recOwn.of(0)) == 1 }, 10*time.Second, time.Millisecond)
	released := func(name string) bool { return testenv.StoreInfo(t, a.reg, stores[name]).Status.WaitingForKind }

	require.NoError(t, a.sw.Disable(t.Context(), "own"))
	assert.True(t, released("own"), "no one else holds its store: it stops")
	assert.Zero(t, testenv.StoreInfo(t, a.reg, stores["own"]).Objects, "and drops its objects")

	require.NoError(t, a.sw.Disable(t.Context(), "a"))
	assert.False(t, released("a"), "b holds the store a gave back")
	assert.Equal(t, 2, testenv.StoreInfo(t, a.reg, stores["b"]).Objects)
	assert.Equal(t, fxcontroller.Running, a.controller(t, "b").Status().State)

	require.NoError(t, a.sw.Disable(t.Context(), "b"))
	assert.True(t, released("b"), "the last holder gave it back")

	recA.next()
	recOwn.next()
	require.NoError(t, a.sw.Enable("a"))
	require.NoError(t, a.sw.Enable("own"))
	a.awaitState(t, "a", fxcontroller.Running)
	a.awaitState(t, "own", fxcontroller.Running)
	assert.False(t, released("a"))
	require.Eventually(t, func() bool {
		return slices.Equal(recA.of(1), []string{"s1", "s2"}) && slices.Equal(recOwn.of(1), []string{"o1"})
	}, 10*time.Second, time.Millisecond, "each reconciles every object again: %q, %q", recA.of(1), recOwn.of(1))
	assert.Equal(t, fxcontroller.Disabled, a.controller(t, "b").Status().State)
	assert.Equal(t, 1.0, testenv.Metric(t, a.ctrls, "fxkube_controller_stops_total", map[string]string{"controller": "own", "reason": "disabled"}))
}

// Switch takes the names --controllers takes, and fails on the others,
// naming the fix; switching a controller to what it is does nothing.
func TestSwitchNames(t *testing.T) {
	var sw *fxcontroller.Switch
	var ctrls fxcontroller.Controllers
	selection, err := fxcontroller.Select("*", "-beta")
	require.NoError(t, err)
	app := fxtest.New(t,
		fxstoretest.Module(),
		fxcontrollertest.Module,
		fx.Supply(selection),
		provideConfigMaps("alpha", "", recordTo(&reconciles{}), nil),
		provideConfigMaps("beta", "", recordTo(&reconciles{}), nil),
		fxcontroller.SetupWithManager(func(manager.Manager) error { return nil }, fxcontroller.WithName("operator")),
		fx.Populate(&sw, &ctrls),
		fx.NopLogger,
	)
	require.NoError(t, app.Err())
	const known = `["alpha" "beta" "fxcontroller_test" "operator"]`
	tests := []struct {
		give    string
		wantErr string
	}{
		{give: "alpha"},
		{give: "fxcontroller_test"}, // alpha's package
		{give: "gamma", wantErr: `fxcontroller.Switch.Disable names ["gamma"], which the app does not have; its controllers, their modules' packages and its hosted operators are ` + known},
		{give: "beta", wantErr: `fxcontroller.Switch.Disable: --controllers=*,-beta leaves "beta" out of the app; choose it there to switch it while the app runs`},
		{give: "operator", wantErr: `fxcontroller.Switch.Disable: "operator" is a hosted operator, which cannot be switched while the app runs; leave it out with --controllers=-operator`},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			err := sw.Disable(t.Context(), tt.give)
			enableErr := sw.Enable(tt.give)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				require.ErrorContains(t, enableErr, "fxcontroller.Switch.Enable")
				return
			}
			require.NoError(t, err)
			require.NoError(t, sw.Disable(t.Context(), tt.give), "twice")
			assert.Equal(t, fxcontroller.Disabled, ctrls[0].Status().State, "not started, and disabled")
			require.NoError(t, enableErr)
			require.NoError(t, sw.Enable(tt.give))
			require.NoError(t, sw.Enable(tt.give), "twice")
			assert.Equal(t, fxcontroller.NotStarted, ctrls[0].Status().State)
		})
	}
}

// A controller disabled before the app starts does not run with it, and
// runs once enabled.
func TestDisabledBeforeStart(t *testing.T) {
	var rec reconciles
	a := startSwitchApp(t, time.Minute, []client.Object{testenv.ConfigMap("x", "a")},
		provideConfigMaps("later", "", recordTo(&rec), nil),
		fx.Invoke(func(sw *fxcontroller.Switch) error { return sw.Disable(context.Background(), "later") }))
	require.Eventually(t, func() bool { return a.logs.FilterMessage("controller is disabled; it runs once enabled").Len() == 1 },
		10*time.Second, time.Millisecond, "the app started it, disabled")
	assert.Equal(t, fxcontroller.Disabled, a.controller(t, "later").Status().State)
	assert.Empty(t, rec.of(0))
	require.NoError(t, a.sw.Enable("later"))
	require.Eventually(t, func() bool { return slices.Equal(rec.of(0), []string{"a"}) }, 10*time.Second, time.Millisecond)
}

// Enabling and disabling from many goroutines at once is safe, and the
// last call wins.
func TestSwitchIsSafeForConcurrentUse(t *testing.T) {
	var rec reconciles
	a := startSwitchApp(t, time.Minute, []client.Object{testenv.ConfigMap("x", "a")},
		provideConfigMaps("busy", "", recordTo(&rec), nil),
		provideConfigMaps("served", "", recordTo(&reconciles{}), nil, fxcontroller.WhenServed()))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 20 {
				name := []string{"busy", "served"}[i%2]
				assert.NoError(t, a.sw.Disable(t.Context(), name))
				assert.NoError(t, a.sw.Enable(name))
			}
		})
	}
	wg.Wait()
	a.awaitState(t, "busy", fxcontroller.Running)
	a.awaitState(t, "served", fxcontroller.Running)
	rec.next()
	require.NoError(t, a.src.Client().Create(t.Context(), testenv.ConfigMap("x", "b")))
	require.Eventually(t, func() bool { return slices.Contains(rec.last(), "b") }, 10*time.Second, time.Millisecond)
	require.NoError(t, a.sw.Disable(t.Context(), "busy"))
	a.awaitState(t, "busy", fxcontroller.Disabled)
}

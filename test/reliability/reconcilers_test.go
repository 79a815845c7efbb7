package reliability

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// configMapController declares a controller named name of the ConfigMaps in
// namespace ns, reconciled by r; r may take the app's client.
func configMapController(name, ns string, r func(client.Client) reconcile.Reconciler) any {
	return func(stores *fxstore.Registry, c client.Client) (*fxcontroller.Controller, error) {
		cms, err := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{Namespace: ns})
		if err != nil {
			return nil, err
		}
		return fxcontroller.New(name, cms, r(c))
	}
}

func createNamespace(t *testing.T, c client.Client, ns string) {
	t.Helper()
	require.NoError(t, c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
}

func createConfigMap(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	require.NoError(t, c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
}

// attempts records when a reconciler was called, by request.
type attempts struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (a *attempts) record(req reconcile.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at == nil {
		a.at = make(map[string][]time.Time)
	}
	a.at[req.Name] = append(a.at[req.Name], time.Now())
}

func (a *attempts) of(name string) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.at[name]...)
}

// A reconciler that panics, one that fails and one that fails for good: the
// panic is recovered and counted, the app and its other reconciles carry on,
// failures are retried with growing delays, and a terminal error is not
// retried.
func TestFailingReconcilers(t *testing.T) {
	admin := newClient(t, testenv.Config(t))
	const ns = "failing"
	createNamespace(t, admin, ns)
	var seen attempts
	log, logs := newLogger(t, zap.ErrorLevel+1)
	app := testenv.App(t, testenv.Config(t), lifecycle.Config{}, log, fxcontroller.Module,
		fxcontroller.Provide(configMapController("failing", ns, func(client.Client) reconcile.Reconciler {
			return reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
				seen.record(req)
				switch req.Name {
				case "panics":
					panic("boom")
				case "fails":
					return reconcile.Result{}, errors.New("injected failure")
				case "fails-for-good":
					return reconcile.Result{}, reconcile.TerminalError(errors.New("injected terminal failure"))
				}
				return reconcile.Result{}, nil
			})
		})))
	before := gatherMetrics(t)
	counter := func(m metricFamilies, name string) float64 {
		return m.value(name, map[string]string{"controller": "failing"}) - before.value(name, map[string]string{"controller": "failing"})
	}
	app.RequireStart()
	defer app.RequireStop()

	createConfigMap(t, admin, ns, "panics")
	createConfigMap(t, admin, ns, "fails")
	createConfigMap(t, admin, ns, "fails-for-good")
	const watch = 4 * time.Second
	time.Sleep(watch / 2)
	createConfigMap(t, admin, ns, "fine")
	require.Eventually(t, func() bool { return len(seen.of("fine")) == 1 }, 10*time.Second, 20*time.Millisecond,
		"the controller carries on after panics and failures")
	time.Sleep(watch / 2)

	m := gatherMetrics(t)
	panics := len(seen.of("panics"))
	t.Logf("in %s: %d panics, %d failures, %d terminal failures", watch, panics, len(seen.of("fails")), len(seen.of("fails-for-good")))
	// Retries go on while the metrics are read: allow for one of each.
	assert.InDelta(t, float64(panics), counter(m, "controller_runtime_reconcile_panics_total"), 1, "every panic is counted")
	assert.InDelta(t, float64(panics+len(seen.of("fails"))+1), counter(m, "controller_runtime_reconcile_errors_total"), 2,
		"panics and failures are counted as errors")
	assert.Equal(t, 1.0, counter(m, "controller_runtime_terminal_reconcile_errors_total"))
	assert.Len(t, seen.of("fails-for-good"), 1, "a terminal error is not retried")
	panicked := logs.FilterMessage("Reconciler error").FilterFieldKey("error").Filter(func(e observer.LoggedEntry) bool {
		return e.ContextMap()["name"] == "panics"
	})
	require.NotZero(t, panicked.Len())
	assert.Contains(t, panicked.All()[0].ContextMap()["error"], "panic: boom [recovered]")

	// Backoff: controller-runtime's default, 5ms doubling per failure of an
	// object. Within the window that is about log2(watch/5ms) ≈ 10
	// attempts, not the hundreds a tight loop would make; no retry comes
	// sooner than the backoff allows (a busy machine only delays them).
	for _, name := range []string{"panics", "fails"} {
		at := seen.of(name)
		assert.GreaterOrEqual(t, len(at), 5, name)
		assert.LessOrEqual(t, len(at), 14, name)
		for i := 1; i < len(at); i++ {
			backoff := 5 * time.Millisecond << (i - 1)
			assert.GreaterOrEqual(t, at[i].Sub(at[i-1]), backoff*9/10, "%s: retry %d came too soon", name, i)
		}
		t.Logf("%s: retried after %s", name, gaps(at))
	}
}

func gaps(at []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(at); i++ {
		out = append(out, at[i].Sub(at[i-1]).Round(time.Millisecond))
	}
	return out
}

// stepReconciler writes two annotations to a ConfigMap with a pause between
// them, honouring its context as a careful reconciler does: a reconcile cut
// short leaves the first without the second.
type stepReconciler struct {
	name    string // of the one ConfigMap it reconciles
	client  client.Client
	pause   time.Duration
	started chan struct{}
	once    sync.Once
	mu      sync.Mutex
	err     error // the last reconcile's
}

func (r *stepReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	defer func() {
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
	}()
	if req.Name != r.name {
		return reconcile.Result{}, nil
	}
	if err := r.annotate(ctx, req, "step-1"); err != nil {
		return reconcile.Result{}, err
	}
	r.once.Do(func() { close(r.started) })
	select {
	case <-time.After(r.pause):
	case <-ctx.Done():
		return reconcile.Result{}, fmt.Errorf("between steps: %w", context.Cause(ctx))
	}
	return reconcile.Result{}, r.annotate(ctx, req, "step-2")
}

func (r *stepReconciler) lastErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *stepReconciler) annotate(ctx context.Context, req reconcile.Request, step string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"done"}}}`, step)
	return r.client.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}},
		client.RawPatch("application/merge-patch+json", patch))
}

// A reconcile in flight when the app stops finishes, within the stop bound,
// and leaves no half-done work; one that would outlast the bound is cut off
// at the bound, and the next start finishes its work.
func TestSlowReconcileAtStop(t *testing.T) {
	admin := newClient(t, testenv.Config(t))
	const ns = "slow"
	createNamespace(t, admin, ns)
	steps := func(name string) string {
		var cm corev1.ConfigMap
		require.NoError(t, admin.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &cm))
		return fmt.Sprintf("%s,%s", cm.Annotations["step-1"], cm.Annotations["step-2"])
	}
	run := func(name string, pause, stopTimeout time.Duration, leaderElection bool) (r *stepReconciler, stopped time.Duration) {
		t.Helper()
		r = &stepReconciler{name: name, pause: pause, started: make(chan struct{})}
		log, _ := newLogger(t, zapcore.WarnLevel)
		lc := lifecycle.Config{StopTimeout: stopTimeout}
		if leaderElection {
			lc.LeaderElection = lifecycle.LeaderElection{Enabled: true, Namespace: ns, Name: name}
		}
		app := testenv.App(t, testenv.Config(t), lc, log, fxcontroller.Module,
			fxcontroller.Provide(configMapController("slow-"+name, ns, func(c client.Client) reconcile.Reconciler {
				r.client = c
				return r
			})))
		app.RequireStart()
		err := admin.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		select {
		case <-r.started:
		case <-time.After(10 * time.Second):
			t.Fatal("the reconcile did not start")
		}
		begin := time.Now()
		require.NoError(t, app.Stop(t.Context()))
		return r, time.Since(begin)
	}

	for _, leader := range []bool{false, true} {
		name := map[bool]string{false: "finishes", true: "finishes-as-leader"}[leader]
		r, took := run(name, 2*time.Second, 10*time.Second, leader)
		t.Logf("stop took %s with a reconcile 2s from done in flight (leader election: %v)", took, leader)
		assert.NoError(t, r.lastErr(), "the reconcile in flight finished")
		assert.Equal(t, "done,done", steps(name), "nothing half-done")
		assert.Less(t, took, 10*time.Second, "within the stop bound")
	}

	r, took := run("outlasts", time.Minute, 2*time.Second, false)
	t.Logf("stop took %s with a reconcile a minute from done in flight, and a stop bound of 2s", took)
	assert.Less(t, took, 5*time.Second, "the stop bound holds")
	// Stop returns at the bound; the reconcile, its context canceled,
	// returns a moment later.
	assert.Eventually(t, func() bool { return errors.Is(r.lastErr(), context.Canceled) }, 5*time.Second, 10*time.Millisecond,
		"the reconcile was cut off at the bound")
	assert.Equal(t, "done,", steps("outlasts"))
	r, _ = run("outlasts", 0, 10*time.Second, false)
	assert.NoError(t, r.lastErr())
	assert.Equal(t, "done,done", steps("outlasts"), "the next start finishes the work")
}

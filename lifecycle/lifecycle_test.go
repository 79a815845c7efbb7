package lifecycle_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testApp is an app on an in-memory source, with probes on a free port.
type testApp struct {
	app    *fxtest.App
	src    *fxstoretest.Source
	probes string
	logs   *observer.ObservedLogs
}

func newTestApp(t *testing.T, cfg lifecycle.Config, opts ...fx.Option) *testApp {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	ta := &testApp{logs: logs}
	if cfg.HealthProbeBindAddress == "" {
		ta.probes = testenv.LoopbackAddr(t)
		cfg.HealthProbeBindAddress = ta.probes
	}
	if cfg.MetricsBindAddress == "" {
		cfg.MetricsBindAddress = "0"
	}
	ta.app = fxtest.New(t,
		fx.Supply(zap.New(core)),
		fxstore.Module,
		lifecycle.Options(cfg),
		fx.Provide(
			func(s *k8sruntime.Scheme) *fxstoretest.Source {
				return fxstoretest.NewSource(s, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x"}})
			},
			func(s *fxstoretest.Source) fxstore.Source { return s },
		),
		fx.Populate(&ta.src),
		fx.Options(opts...),
	)
	return ta
}

func probe(t *testing.T, addr, path string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func TestRunnablesStartOnlyAfterEveryStoreSynced(t *testing.T) {
	var (
		cms         *fxstore.Store[*corev1.ConfigMap]
		sawSynced   atomic.Bool
		started     = make(chan struct{})
		readyDuring atomic.Int32
	)
	ta := newTestApp(t, lifecycle.Config{},
		fx.Invoke(func(r *fxstore.Registry) (err error) {
			cms, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
			return err
		}),
		lifecycle.Runnables(manager.RunnableFunc(func(ctx context.Context) error {
			_, err := cms.Get("a", "x")
			sawSynced.Store(err == nil)
			close(started)
			<-ctx.Done()
			return nil
		})),
	)
	release := ta.src.HoldLists()

	startErr := make(chan error, 1)
	go func() { startErr <- ta.app.Start(t.Context()) }()
	require.Eventually(t, func() bool { return probe(t, ta.probes, "/healthz") == http.StatusOK }, 5*time.Second, 10*time.Millisecond)
	readyDuring.Store(int32(probe(t, ta.probes, "/readyz")))
	_, syncing := get(t, http.DefaultClient, "http://"+ta.probes+"/readyz?verbose")
	select {
	case <-started:
		t.Fatal("runnable started before the store synced")
	case <-time.After(200 * time.Millisecond):
	}
	release()
	require.NoError(t, <-startErr)
	<-started
	assert.True(t, sawSynced.Load(), "the runnable's first read found the store synced")
	assert.Equal(t, int32(http.StatusInternalServerError), readyDuring.Load(), "/readyz fails while stores sync")
	assert.Contains(t, syncing, "[-]stores failed: reason withheld\n")
	assert.Contains(t, syncing, "[-]runnables failed: reason withheld\n")
	assert.Equal(t, http.StatusOK, probe(t, ta.probes, "/readyz"))

	require.NoError(t, ta.app.Stop(t.Context()))
	assert.Equal(t, 0, probe(t, ta.probes, "/readyz"), "servers are closed after stop")
}

func TestReadinessTurnsOffWhenStopBegins(t *testing.T) {
	var ta *testApp
	stopping := make(chan int, 1)
	ta = newTestApp(t, lifecycle.Config{},
		lifecycle.Runnables(manager.RunnableFunc(func(ctx context.Context) error {
			<-ctx.Done()
			// Runnables stop first; by then /readyz must already say no.
			stopping <- probe(t, ta.probes, "/readyz")
			return nil
		})),
	)
	ta.app.RequireStart()
	assert.Equal(t, http.StatusOK, probe(t, ta.probes, "/readyz"))
	ta.app.RequireStop()
	assert.Equal(t, http.StatusInternalServerError, <-stopping)
}

func TestSyncTimeoutNamesTheStore(t *testing.T) {
	ta := newTestApp(t, lifecycle.Config{SyncTimeout: 200 * time.Millisecond},
		fx.Invoke(func(r *fxstore.Registry) error {
			_, err := fxstore.For[*corev1.Secret](r, fxstore.Spec{Namespace: "slow"})
			return err
		}),
	)
	release := ta.src.HoldLists()
	defer release()
	err := ta.app.Start(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stores did not sync within the sync timeout of 200ms (raise it with --sync-timeout)")
	assert.Contains(t, err.Error(), `store Secret/v1 (namespace "slow"): not synced`)
	assert.Equal(t, 0, probe(t, ta.probes, "/healthz"), "a failed start closes the servers")
}

func TestFailingRunnableStopsTheApp(t *testing.T) {
	ta := newTestApp(t, lifecycle.Config{},
		lifecycle.Runnables(manager.RunnableFunc(func(context.Context) error { return errors.New("boom") })),
	)
	ta.app.RequireStart()
	select {
	case sig := <-ta.app.Wait():
		assert.Equal(t, 1, sig.ExitCode)
	case <-time.After(5 * time.Second):
		t.Fatal("the app did not stop")
	}
	ta.app.RequireStop()
	assert.Equal(t, 1, ta.logs.FilterMessage("runnable failed; stopping the app").Len())
}

func TestStopIsBoundedByStopTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ta := newTestApp(t, lifecycle.Config{StopTimeout: 100 * time.Millisecond},
		lifecycle.Runnables(manager.RunnableFunc(func(context.Context) error {
			<-release // ignores its context
			return nil
		})),
	)
	ta.app.RequireStart()
	begin := time.Now()
	ta.app.RequireStop()
	assert.Less(t, time.Since(begin), 5*time.Second)
	assert.Equal(t, 1, ta.logs.FilterMessage("runnables did not finish within the stop timeout; stopping anyway").Len())
}

// Given last to fx.New, as the app package gives it, Options' start hook
// is the app's last one, after the hook of a root option given before it,
// which runs before the probes serve. An Interrupt closed in that hook cuts
// the start short in the lifecycle's hook, and fx stops the hook before it:
// nothing is left running (goleak).
func TestInterruptCutsTheStartShort(t *testing.T) {
	probes := testenv.LoopbackAddr(t)
	interrupt := make(chan struct{})
	served, stopped := -1, false
	app := fx.New(
		fxstore.Module,
		fx.Provide(func(s *k8sruntime.Scheme) fxstore.Source { return fxstoretest.NewSource(s) }),
		fx.Supply(lifecycle.Interrupt(interrupt)),
		fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.Hook{
				OnStart: func(context.Context) error {
					served = probe(t, probes, "/readyz")
					close(interrupt)
					return nil
				},
				OnStop: func(context.Context) error {
					stopped = true
					return nil
				},
			})
		}),
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: probes}),
	)
	require.NoError(t, app.Err())
	require.ErrorIs(t, app.Start(t.Context()), context.Canceled)
	assert.Zero(t, served, "the probes did not serve yet: the lifecycle's hook had not run")
	assert.True(t, stopped, "fx stopped the hook started before the lifecycle's")
	assert.Zero(t, probe(t, probes, "/readyz"), "the probes serve no more")
}

// An Interrupt closed while the stores sync cuts the start short there: the
// start fails at once, its servers close and no runnable starts.
func TestInterruptWhileStoresSync(t *testing.T) {
	interrupt := make(chan struct{})
	var ran atomic.Bool
	ta := newTestApp(t, lifecycle.Config{SyncTimeout: time.Minute},
		fx.Supply(lifecycle.Interrupt(interrupt)),
		fx.Invoke(func(r *fxstore.Registry) error {
			_, err := fxstore.For[*corev1.Secret](r, fxstore.Spec{Namespace: "slow"})
			return err
		}),
		lifecycle.Runnables(manager.RunnableFunc(func(context.Context) error {
			ran.Store(true)
			return nil
		})),
	)
	release := ta.src.HoldLists()
	defer release()
	started := make(chan error, 1)
	go func() { started <- ta.app.Start(t.Context()) }()
	require.Eventually(t, func() bool { return probe(t, ta.probes, "/healthz") == http.StatusOK }, 10*time.Second, 10*time.Millisecond,
		"the start serves the probes, then waits for the stores")
	close(interrupt)
	select {
	case err := <-started:
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), "sync stores")
	case <-time.After(10 * time.Second):
		t.Fatal("the start went on 10 s after the interrupt")
	}
	assert.False(t, ran.Load(), "no runnable started")
	assert.Zero(t, probe(t, ta.probes, "/healthz"), "the servers closed")
}

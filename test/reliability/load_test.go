package reliability

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// heapSampler records the peak of the process's Go heap.
type heapSampler struct {
	stop context.CancelFunc
	done sync.WaitGroup
	peak uint64 // HeapAlloc, bytes; read after stop
}

func sampleHeap(every time.Duration) *heapSampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &heapSampler{stop: cancel}
	s.done.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			s.peak = max(s.peak, m.HeapAlloc)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return s
}

// Stop stops sampling and returns the peak, in MiB.
func (s *heapSampler) Stop() float64 {
	s.stop()
	s.done.Wait()
	return float64(s.peak) / (1 << 20)
}

// loadChurn is how long TestLoad churns; FXKUBE_LOAD_CHURN (a Go duration)
// overrides it.
func loadChurn(t *testing.T) time.Duration {
	d := 20 * time.Second
	if v := os.Getenv("FXKUBE_LOAD_CHURN"); v != "" {
		var err error
		d, err = time.ParseDuration(v)
		require.NoError(t, err, "FXKUBE_LOAD_CHURN")
	}
	return d
}

// TestLoad runs rollout and mirror on 10,000 objects (20 namespaces of 150
// ConfigMaps and 150 Secrets that 100 Deployments use, and 50 ConfigMaps and
// 50 Secrets mirrored to one or two other namespaces), changes them for a
// while, restarting the API server halfway, and checks the outcome object by
// object: no update is lost. It
// reports the peak Go heap of the process (the app, and the test driving
// it), sampled while the app syncs, converges, churns and converges again.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test; skipped with -short")
	}
	ctx := t.Context()
	cp := testenv.ControlPlane(t)
	admin := newClient(t, testenv.Config(t))
	l := layout{Configs: 150, Deployments: 100, Sources: 50}
	w := newWorld("load", 20, l)
	require.Len(t, w.refs(), 10_000)

	begin := time.Now()
	require.NoError(t, w.create(ctx, admin, 16))
	t.Logf("created %d objects in %s", len(w.refs()), time.Since(begin).Round(time.Millisecond))

	heap := sampleHeap(100 * time.Millisecond)
	defer heap.Stop()
	log, _ := newLogger(t, zap.ErrorLevel)
	a := newExampleApp(t, testenv.Config(t), lifecycle.Config{}, log)
	begin = time.Now()
	a.RequireStart()
	defer a.RequireStop()
	t.Logf("synced in %s", time.Since(begin).Round(time.Millisecond))
	_, problems := w.settle(t, admin, a, 3*time.Minute)
	require.Empty(t, problems, "the initial state")
	cl, err := w.read(ctx, admin)
	require.NoError(t, err)
	t.Logf("converged on %d objects, %d of them made by mirror, %s after start", len(cl.objects), len(cl.objects)-len(w.refs()),
		time.Since(begin).Round(time.Millisecond))

	// Halfway through the churn, the API server restarts: the writes of
	// the churn wait for it, and the app's stores list 13,000 objects again.
	churn := loadChurn(t)
	writes := w.writes.Load()
	churnCtx, cancel := context.WithTimeout(ctx, churn)
	defer cancel()
	restarted := make(chan error, 1)
	go func() {
		select {
		case <-time.After(churn / 2):
		case <-churnCtx.Done():
		}
		begin := time.Now()
		err := cp.StopAPIServer()
		time.Sleep(3 * time.Second)
		err = errors.Join(err, cp.StartAPIServer())
		t.Logf("API server restarted during the churn, down for %s", time.Since(begin).Round(time.Millisecond))
		restarted <- err
	}()
	require.NoError(t, w.churn(churnCtx, admin, 8))
	require.NoError(t, <-restarted)
	changes := w.writes.Load() - writes
	t.Logf("churn: %d changes in %s (%.0f/s)", changes, churn, float64(changes)/churn.Seconds())

	begin = time.Now()
	_, problems = w.settle(t, admin, a, 3*time.Minute)
	settled := time.Since(begin)
	peak := heap.Stop()
	require.Empty(t, problems)
	t.Logf("settled %s after the churn", settled.Round(time.Millisecond))
	t.Logf("peak heap %.0f MiB", peak)

	lost := w.converge(t, admin, a, time.Minute)
	t.Logf("objects whose last update was lost: %d", lost)
	m := gatherMetrics(t)
	for _, c := range []string{"rollout", "mirror-configmaps", "mirror-secrets"} {
		t.Logf("controller %s: %s reconciles, %s errors", c,
			strconv.FormatFloat(m.value("controller_runtime_reconcile_total", map[string]string{"controller": c}), 'f', 0, 64),
			strconv.FormatFloat(m.value("controller_runtime_reconcile_errors_total", map[string]string{"controller": c}), 'f', 0, 64))
	}
}

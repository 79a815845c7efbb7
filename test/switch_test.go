package test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// switched records what a controller of the switch test reconciled, and
// holds its first reconcile until released.
type switched struct {
	mu      sync.Mutex
	seen    []string
	hold    bool
	entered chan struct{}
	release chan struct{}
}

func (s *switched) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s.mu.Lock()
	hold := s.hold
	s.hold = false
	s.mu.Unlock()
	if hold {
		close(s.entered)
		select {
		case <-s.release:
		case <-ctx.Done():
			return reconcile.Result{}, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, req.Name)
	return reconcile.Result{}, nil
}

// reconciled returns how many reconciles there were, and whether names
// are among those after the first skip.
func (s *switched) reconciled(skip int, names ...string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		found := false
		for _, seen := range s.seen[min(skip, len(s.seen)):] {
			found = found || seen == name
		}
		if !found {
			return len(s.seen), false
		}
	}
	return len(s.seen), true
}

// On a real API server: a controller disabled while a reconcile is in
// flight finishes it and reconciles nothing more; a controller that waits
// for its kinds closes its store's watch, and one that does not keeps it.
// Enabled, each reconciles every object again. describe and the metrics
// say so throughout.
func TestControllersDisabledAndEnabledByName(t *testing.T) {
	cfg := testenv.Config(t)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "switch")
	for i := range 3 {
		_, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d", i)}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kube.CoreV1().ConfigMaps(ns).Create(t.Context(), testenv.ConfigMap(ns, fmt.Sprintf("c-%d", i)), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	secrets := &switched{hold: true, entered: make(chan struct{}), release: make(chan struct{})}
	configMaps := &switched{}
	var (
		reg      *fxstore.Registry
		ctrls    fxcontroller.Controllers
		sw       *fxcontroller.Switch
		keys     = map[string]fxstore.Key{}
		watching = func() float64 { return scrapeRequests(t, cfg, "secrets").OpenWatches }
	)
	module := fx.Options(fxcontroller.Module,
		fxcontroller.Provide(func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
			s, err := fxstore.For[*corev1.Secret](r, fxstore.Spec{Namespace: ns}, fxstore.WithConsumer("secrets"))
			if err != nil {
				return nil, err
			}
			keys["secrets"] = s.Key()
			return fxcontroller.New("secrets", s, secrets, fxcontroller.WhenServed())
		}),
		fxcontroller.Provide(func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
			s, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: ns}, fxstore.WithConsumer("configmaps"))
			if err != nil {
				return nil, err
			}
			keys["configmaps"] = s.Key()
			return fxcontroller.New("configmaps", s, configMaps)
		}),
	)
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Core()))
	before := watching()
	a := testenv.App(t, cfg, lifecycle.Config{StopTimeout: 10 * time.Second}, log, module, fx.Populate(&reg, &ctrls, &sw))
	a.RequireStart()
	t.Cleanup(a.RequireStop)
	require.Eventually(t, func() bool { return watching() == before+1 }, 10*time.Second, 10*time.Millisecond, "the Secrets' store watches")
	<-secrets.entered

	// Disable: the reconcile in flight finishes, nothing queued runs, and
	// the Secrets' watch closes.
	done := make(chan error, 1)
	begin := time.Now()
	go func() { done <- sw.Disable(t.Context(), "secrets") }()
	require.Eventually(t, func() bool {
		return logs.FilterMessage("controller stopping; reconciles in flight finish within the stop timeout").FilterField(zap.String("controller", "secrets")).Len() == 1
	}, 10*time.Second, time.Millisecond)
	close(secrets.release)
	require.NoError(t, <-done)
	disabled := time.Since(begin)
	n, _ := secrets.reconciled(0)
	require.Equal(t, 1, n, "only the reconcile in flight ran")
	require.Eventually(t, func() bool { return watching() == before }, 10*time.Second, 10*time.Millisecond, "the Secrets' watch closed")
	watchClosed := time.Since(begin)
	assert.True(t, testenv.StoreInfo(t, reg, keys["secrets"]).Status.WaitingForKind, "its store stopped")

	require.NoError(t, sw.Disable(t.Context(), "configmaps"))
	cms := testenv.StoreInfo(t, reg, keys["configmaps"])
	assert.True(t, cms.Status.Synced, "a controller that does not wait for its kinds keeps its stores")
	assert.Equal(t, 3, cms.Objects)

	graph := app.NewGraph(reg, ctrls, nil)
	var text strings.Builder
	graph.WriteText(&text)
	for _, c := range graph.Controllers {
		assert.Equal(t, "disabled", c.State, "describe: %s", c.Name)
	}
	assert.Contains(t, text.String(), "stopped: its controllers are disabled")
	assert.Equal(t, 1.0, testenv.Metric(t, ctrls, "fxkube_controller_state", map[string]string{"controller": "secrets", "state": "disabled"}))
	assert.Equal(t, 1.0, testenv.Metric(t, ctrls, "fxkube_controller_stops_total", map[string]string{"controller": "configmaps", "reason": "disabled"}))

	// Enable: each runs again, with a new queue, and reconciles every
	// object.
	cmsSeen, _ := configMaps.reconciled(0)
	enabled := time.Now()
	require.NoError(t, sw.Enable("secrets"))
	require.NoError(t, sw.Enable("configmaps"))
	require.Eventually(t, func() bool { _, ok := secrets.reconciled(1, "s-0", "s-1", "s-2"); return ok }, time.Minute, time.Millisecond)
	secretsAgain := time.Since(enabled)
	require.Eventually(t, func() bool { _, ok := configMaps.reconciled(cmsSeen, "c-0", "c-1", "c-2"); return ok }, time.Minute, time.Millisecond)
	assert.Equal(t, before+1, watching(), "the Secrets' store watches again")
	assert.Equal(t, 2.0, testenv.Metric(t, ctrls, "fxkube_controller_starts_total", map[string]string{"controller": "secrets"}))
	t.Logf("Disable returned %s after it was called (the test released the reconcile in flight once the stop began); the watch closed at the API server %s after the call; enabled, the controller that waits for its kinds reconciled every Secret again %s later",
		disabled.Round(time.Millisecond), watchClosed.Round(time.Millisecond), secretsAgain.Round(time.Millisecond))
}

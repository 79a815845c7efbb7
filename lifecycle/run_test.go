package lifecycle_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/lifecycle"
)

// runIn runs app with lifecycle.Run in the background, as a suite runs a
// manager, and returns where its result arrives.
func runIn(ctx context.Context, app *fx.App) <-chan error {
	done := make(chan error, 1)
	go func() { done <- lifecycle.Run(ctx, app) }()
	return done
}

// result waits for Run's result, bounded so that a Run that does not
// return fails the test rather than hang it.
func result(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("lifecycle.Run did not return")
		return nil
	}
}

// Run starts the app, blocks while its context lasts, and, once it ends,
// stops the app and returns nil, as a manager's Start does.
func TestRunBlocksUntilTheContextEnds(t *testing.T) {
	var running, stopped atomic.Bool
	ta := newTestApp(t, lifecycle.Config{},
		lifecycle.Runnables(manager.RunnableFunc(func(ctx context.Context) error {
			running.Store(true)
			<-ctx.Done()
			stopped.Store(true)
			return nil
		})),
	)
	ctx, cancel := context.WithCancel(t.Context())
	done := runIn(ctx, ta.app.App)
	require.Eventually(t, func() bool { return probe(t, ta.probes, "/readyz") == http.StatusOK }, 10*time.Second, 10*time.Millisecond,
		"the app starts and becomes ready")
	require.True(t, running.Load())
	select {
	case err := <-done:
		t.Fatalf("Run returned while its context lasted: %v", err)
	default:
	}
	cancel()
	require.NoError(t, result(t, done))
	assert.True(t, stopped.Load(), "the runnable was stopped")
	assert.Zero(t, probe(t, ta.probes, "/healthz"), "the servers closed")
}

// A context that ends while the stores sync cuts the start short: it
// rolls back, no runnable starts, and Run returns nil.
func TestRunCutShortWhileStoresSync(t *testing.T) {
	var ran atomic.Bool
	ta := newTestApp(t, lifecycle.Config{SyncTimeout: time.Minute},
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
	ctx, cancel := context.WithCancel(t.Context())
	done := runIn(ctx, ta.app.App)
	require.Eventually(t, func() bool { return probe(t, ta.probes, "/healthz") == http.StatusOK }, 10*time.Second, 10*time.Millisecond,
		"the start serves the probes, then waits for the stores")
	cancel()
	require.NoError(t, result(t, done))
	assert.False(t, ran.Load(), "no runnable started")
	assert.Zero(t, probe(t, ta.probes, "/healthz"), "the servers closed")
}

// A runnable that fails once the app runs stops it, as it stops a
// manager: Run returns its error without its context ending.
func TestRunReturnsWhenARunnableFails(t *testing.T) {
	ta := newTestApp(t, lifecycle.Config{},
		lifecycle.Runnables(manager.RunnableFunc(func(context.Context) error { return errors.New("boom") })),
	)
	err := result(t, runIn(t.Context(), ta.app.App))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "runnable ")
	assert.Contains(t, err.Error(), ": boom")
	assert.Zero(t, probe(t, ta.probes, "/healthz"), "the servers closed")
}

// What fails before the app runs is Run's error: the build's, and the
// start's.
func TestRunReturnsBuildAndStartErrors(t *testing.T) {
	t.Run("build", func(t *testing.T) {
		app := fx.New(fx.NopLogger, fxstore.Module, lifecycle.Options(lifecycle.Config{TLS: lifecycle.TLSOptions{MinVersion: "TLS1.3"}}))
		assert.ErrorContains(t, lifecycle.Run(t.Context(), app), `--tls-min-version: unknown TLS version "TLS1.3"`)
	})
	t.Run("start", func(t *testing.T) {
		ta := newTestApp(t, lifecycle.Config{SyncTimeout: 100 * time.Millisecond},
			fx.Invoke(func(r *fxstore.Registry) error {
				_, err := fxstore.For[*corev1.Secret](r, fxstore.Spec{Namespace: "slow"})
				return err
			}),
		)
		release := ta.src.HoldLists()
		defer release()
		err := result(t, runIn(t.Context(), ta.app.App))
		assert.ErrorContains(t, err, "stores did not sync within the sync timeout of 100ms")
	})
}

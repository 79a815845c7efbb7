package fxcontroller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

// A reconcile in flight when the app stops finishes with a live context,
// rather than fail half-done; the app waits for it.
func TestReconcileInFlightFinishesOnStop(t *testing.T) {
	const pause = 300 * time.Millisecond
	started := make(chan struct{})
	var once sync.Once
	result := make(chan error, 1)
	app := fxtest.New(t,
		fxstoretest.Module(testenv.ConfigMap("a", "x")),
		fxcontrollertest.Module,
		fxcontroller.Provide(func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
			cms, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
			if err != nil {
				return nil, err
			}
			return fxcontroller.New("slow", cms, reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
				once.Do(func() { close(started) })
				select {
				case <-time.After(pause):
					result <- nil
				case <-ctx.Done():
					result <- context.Cause(ctx)
				}
				return reconcile.Result{}, nil
			}))
		}),
		fx.NopLogger,
	)
	app.RequireStart()
	<-started
	begin := time.Now()
	app.RequireStop()
	require.NoError(t, <-result, "the reconcile's context lives on while the app stops")
	assert.GreaterOrEqual(t, time.Since(begin), pause/2, "stop waited for the reconcile")
}

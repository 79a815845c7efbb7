package fxstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// An app on fxstoretest.Module fails to stop, naming the object and the
// change, when code changed an object it read from a store; and stops
// cleanly when no one did.
func TestStoppingTellsOfObjectsChangedInPlace(t *testing.T) {
	for _, change := range []bool{false, true} {
		var store *fxstore.Store[*corev1.ConfigMap]
		app := fx.New(
			fx.NopLogger,
			fxstoretest.Module(testenv.ConfigMap("default", "web", testenv.Labels{"app": "web"})),
			fx.Invoke(func(r *fxstore.Registry) (err error) {
				store, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
				return err
			}),
			lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0"}),
		)
		require.NoError(t, app.Start(t.Context()))
		cm, err := store.Get("default", "web")
		require.NoError(t, err)
		if change {
			cm.Labels["app"] = "db"
		}
		err = app.Stop(context.Background())
		if !change {
			assert.NoError(t, err)
			continue
		}
		require.Error(t, err)
		assert.Contains(t, err.Error(), "store ConfigMap/v1 (all namespaces): default/web was changed in place")
		assert.Contains(t, err.Error(), `-   "app": "web"`)
		assert.Contains(t, err.Error(), `+   "app": "db"`)
	}
}

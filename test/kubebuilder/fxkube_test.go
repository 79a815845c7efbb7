package kubebuilder_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/lifecycle/lifecycletest"
	batchv1 "github.com/fxkube/fxkube/test/kubebuilder/api/v1"
)

// startFxkube runs setup as an fxkube binary does: hosted in an fx app
// with fxcontroller.SetupWithManager, its caches served by the app's
// stores. It is startControllerRuntime with the start-up lines changed:
// the app is made where the manager was, from the same options, and
// lifecycle.Run runs it where mgr.Start ran the manager. The rest, the
// façade's Elected and cache sync among it, is the same.
func startFxkube(t *testing.T, cfg *rest.Config, setup func(ctrl.Manager) error) {
	t.Helper()
	var mgr ctrl.Manager
	app := fx.New(
		fx.Supply(cfg, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))),
		fxstore.Module,
		fxstore.AddToScheme(batchv1.AddToScheme),
		fxcontroller.Module,
		fxcontroller.SetupWithManager(func(m ctrl.Manager) error { mgr = m; return setup(m) },
			fxcontroller.WithName("task-operator"),
			fxcontroller.WithManagerOptions(managerOptions(t))),
		// No webhooks: the zero WebhookInstallOptions.
		lifecycle.Options(lifecycletest.EnvtestConfig(envtest.WebhookInstallOptions{})),
	)
	require.NoError(t, app.Err(), "make the manager, and set the operator up")

	ctx, cancel := context.WithCancel(t.Context())
	var runErr error
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		runErr = lifecycle.Run(ctx, app)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
		require.NoError(t, runErr, "run the manager")
	})
	select {
	case <-mgr.Elected():
	case <-stopped:
		t.Fatal("the manager stopped before it was elected") // the cleanup reports why
	}
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx), "the manager's cache syncs")
}

package kubebuilder_test

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	batchv1 "github.com/fxkube/fxkube/test/kubebuilder/api/v1"
)

// startFxkube runs setup as an fxkube binary does: hosted in an fx app
// with fxcontroller.SetupWithManager, its caches served by the app's
// stores, without metrics or probe servers, which the tests do not read.
// Start returns once every store has synced and the controllers run.
func startFxkube(t *testing.T, cfg *rest.Config, setup func(ctrl.Manager) error) {
	t.Helper()
	app := testenv.App(t, cfg, lifecycle.Config{}, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
		fxstore.AddToScheme(batchv1.AddToScheme),
		fxcontroller.Module,
		fxcontroller.SetupWithManager(setup, fxcontroller.WithName("task-operator")),
	)
	app.RequireStart()
	t.Cleanup(app.RequireStop)
}

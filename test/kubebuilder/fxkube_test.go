package kubebuilder_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
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

// startFxkubeInMember runs setup hosted in every member cluster of an
// fxkube app (fxcontroller.InEveryMemberCluster), with cfg's cluster its
// one member. The app's own cluster is another control plane, which has
// not even the operator's CRD: every behaviour of the operator is seen in
// the member.
func startFxkubeInMember(t *testing.T, cfg *rest.Config, setup func(ctrl.Manager) error) {
	t.Helper()
	own := testenv.Members(t, 1)[0].Config
	provider := fxcluster.ProviderFunc(func(ctx context.Context, clusters fxcluster.Aware) error {
		if err := clusters.Engage(ctx, "tests", cfg); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	})
	var fleet *fxcluster.Fleet
	app := fx.New(
		fx.Supply(own, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))),
		fxstore.Module,
		fxstore.AddToScheme(batchv1.AddToScheme),
		fxcontroller.Module,
		fxcluster.Module,
		fxcluster.WithProvider(func() fxcluster.Provider { return provider }),
		fxcontroller.SetupWithManager(setup,
			fxcontroller.WithName("task-operator"),
			fxcontroller.WithManagerOptions(managerOptions(t)),
			fxcontroller.InEveryMemberCluster()),
		// Another module reads Tasks in every member: the operator's
		// cache and it share one store there.
		fx.Invoke(func(f *fxcluster.Fleet) error {
			_, err := fxcluster.For[*batchv1.Task](f, fxstore.Spec{}, fxstore.WithConsumer("another-module"))
			return err
		}),
		lifecycle.Options(lifecycletest.EnvtestConfig(envtest.WebhookInstallOptions{})),
		fx.Populate(&fleet),
	)
	require.NoError(t, app.Err(), "make the app, and declare the operator in every member")

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
		require.NoError(t, runErr, "run the app")
	})
	require.Eventually(t, func() bool {
		_, err := fleet.GetCluster(ctx, "tests")
		return err == nil
	}, time.Minute, 50*time.Millisecond, "the member joins")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var tasks []fxstore.StoreInfo
		for _, m := range fleet.Clusters() {
			for _, s := range m.Stores {
				if s.Key.Kind.Kind == "Task" {
					tasks = append(tasks, s)
				}
			}
		}
		require.Len(c, tasks, 1, "one Task store in the member: %v", tasks)
		assert.Len(c, tasks[0].Consumers, 2, "for the operator and the other module")
		assert.Contains(c, tasks[0].Consumers, "another-module")
	}, time.Minute, 50*time.Millisecond)
}

package fxcontrollertest

import (
	"context"
	"slices"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
)

// Module stands in for fxcontroller.Module without an API server. It
// collects the app's controllers (fxcontroller.Collect) and provides
//
//   - as the client.Client, the fake client behind the app's
//     *fxstoretest.Source, so what reconcilers write reaches the stores;
//   - as the fxcontroller.RecorderProvider, a *Recorder, which keeps events
//     in memory.
//
// With fxstoretest.Module, which runs the app's lifecycle, controllers run as
// they would in production:
//
//	fx.New(fxstoretest.Module(objs...), fxcontrollertest.Module, rollout.Module)
var Module = fx.Options(
	fxcontroller.Collect,
	fx.Provide(
		func(src *fxstoretest.Source) client.Client { return src.Client() },
		fx.Annotate(NewRecorder, fx.As(fx.Self()), fx.As(new(fxcontroller.RecorderProvider))),
	),
)

// App is an fx app of controller modules whose stores are synced from an
// in-memory source and whose controllers do not run: a test calls Reconcile
// to drive one, then checks the client's objects and the recorded events.
type App struct {
	tb          testing.TB
	controllers fxcontroller.Controllers
	source      *fxstoretest.Source
	registry    *fxstore.Registry
	recorder    *Recorder
}

// New starts an app of module, with fxstore.Module and Module, whose stores
// hold objs, and waits for them to sync. The app logs to tb and stops when the
// test ends. A module that fails to build fails the test.
//
//	app := fxcontrollertest.New(t, rollout.Module, deployment)
//	_, err := app.Reconcile(t.Context(), "rollout", client.ObjectKeyFromObject(deployment))
func New(tb testing.TB, module fx.Option, objs ...client.Object) *App {
	tb.Helper()
	a := &App{tb: tb}
	app := fxtest.New(tb,
		fx.Supply(zaptest.NewLogger(tb)),
		fxstore.Module,
		fx.Provide(func(scheme *k8sruntime.Scheme) *fxstoretest.Source { return fxstoretest.NewSource(scheme, objs...) }),
		Module,
		module,
		fx.Populate(&a.controllers, &a.source, &a.registry, &a.recorder),
	)
	app.RequireStart()
	tb.Cleanup(app.RequireStop)
	fxstoretest.Start(tb, a.registry, a.source)
	return a
}

// Reconcile reconciles the object key names with the named controller, in
// the caller's goroutine, as the running controller would (see
// fxcontroller.Controller.Reconcile). The stores see what earlier reconciles
// wrote once their watches deliver it, as from an API server; read through
// Client to see it at once.
func (a *App) Reconcile(ctx context.Context, controller string, key client.ObjectKey) (reconcile.Result, error) {
	return a.Controller(controller).Reconcile(ctx, reconcile.Request{NamespacedName: key})
}

// Controller returns the app's controller with the given name; there being
// none fails the test.
func (a *App) Controller(name string) *fxcontroller.Controller {
	a.tb.Helper()
	i := slices.IndexFunc(a.controllers, func(c *fxcontroller.Controller) bool { return c.Name() == name })
	if i < 0 {
		names := make([]string, len(a.controllers))
		for i, c := range a.controllers {
			names[i] = c.Name()
		}
		a.tb.Fatalf("fxcontrollertest: no controller named %q; the app has %q", name, names)
	}
	return a.controllers[i]
}

// Client returns the fake client the app's stores and reconcilers share.
func (a *App) Client() client.WithWatch { return a.source.Client() }

// Registry returns the app's store registry.
func (a *App) Registry() *fxstore.Registry { return a.registry }

// Events returns the events the app's reconcilers recorded, in order.
func (a *App) Events() []Event { return a.recorder.Events() }

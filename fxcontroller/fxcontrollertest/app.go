package fxcontrollertest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/lifecycle"
)

// Module stands in for fxcontroller.Module without an API server, and
// runs the app's lifecycle on the stores of fxstoretest.Module, its probe
// and metrics servers off: stores start and sync when the app starts,
// controllers run after that, and all stop when the app stops. It
// collects the app's controllers (fxcontroller.Collect) and provides
//
//   - as the client.Client, the fake client behind the app's
//     *fxstoretest.Source, so what reconcilers write reaches the stores;
//   - as the fxcontroller.RecorderProvider, a *Recorder, which keeps events
//     in memory;
//   - as the *connection.Connection, one whose clients are that fake client,
//     so that operators hosted with fxcontroller.SetupWithManager read from
//     their cache over the in-memory stores and write to the fake client.
//
// With fxstoretest.Module, controllers run as they would in production:
//
//	fx.New(fxstoretest.Module(objs...), fxcontrollertest.Module, rollout.Module)
var Module = fx.Options(
	fakes,
	lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0"}),
)

// fakes are Module's stand-ins, without the lifecycle: New's controllers
// do not run.
var fakes = fx.Options(
	fxcontroller.Collect,
	fx.Provide(
		func(src *fxstoretest.Source) client.Client { return src.Client() },
		fx.Annotate(NewRecorder, fx.As(fx.Self()), fx.As(new(fxcontroller.RecorderProvider))),
		newConnection,
	),
)

// newConnection is a connection whose clients are src's fake client; it
// sends no request anywhere.
func newConnection(src *fxstoretest.Source) *connection.Connection {
	return &connection.Connection{
		Config:     &rest.Config{Host: "https://fxcontrollertest.invalid"},
		HTTPClient: &http.Client{Transport: refuseRequests{}},
		Mapper:     src.Client().RESTMapper(),
		Client:     src.Client(),
		NewClient: func(_ *rest.Config, o client.Options) (client.Client, error) {
			if o.Cache == nil || o.Cache.Reader == nil {
				return src.Client(), nil
			}
			reads := cachedReads{WithWatch: src.Client(), cache: o.Cache.Reader, unstructured: o.Cache.Unstructured, uncached: map[schema.GroupVersionKind]bool{}}
			for _, obj := range o.Cache.DisableFor {
				gvk, err := apiutil.GVKForObject(obj, src.Client().Scheme())
				if err != nil {
					return nil, err
				}
				reads.uncached[gvk] = true
			}
			return reads, nil
		},
	}
}

// cachedReads reads from a hosted operator's cache and writes to the fake
// client, as a manager's client reads from its cache and writes to the API
// server: kinds of Cache.DisableFor, and unstructured objects unless
// Cache.Unstructured, are read from the fake client, as controller-runtime's
// client reads them from the API server.
type cachedReads struct {
	client.WithWatch
	cache        client.Reader
	unstructured bool
	uncached     map[schema.GroupVersionKind]bool
}

func (c cachedReads) cached(obj k8sruntime.Object) bool {
	if _, ok := obj.(k8sruntime.Unstructured); ok && !c.unstructured {
		return false
	}
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return true // the cache reports it
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return !c.uncached[gvk]
}

func (c cachedReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if !c.cached(obj) {
		return c.WithWatch.Get(ctx, key, obj, opts...)
	}
	return c.cache.Get(ctx, key, obj, opts...)
}

func (c cachedReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if !c.cached(list) {
		return c.WithWatch.List(ctx, list, opts...)
	}
	return c.cache.List(ctx, list, opts...)
}

// refuseRequests fails every request: fxcontrollertest has no API server.
type refuseRequests struct{}

func (refuseRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("fxcontrollertest: no API server to send %s %s to; read and write through the app's clients", req.Method, req.URL)
}

// App is an fx app of controller modules whose stores are synced from an
// in-memory source and whose controllers do not run: a test calls Reconcile
// to drive one, then checks the client's objects and the recorded events.
type App struct {
	tb          testing.TB
	controllers fxcontroller.Controllers
	hosted      fxcontroller.HostedOperators
	source      *fxstoretest.Source
	registry    *fxstore.Registry
	recorder    *Recorder
}

// New starts an app of module, with fxstore.Module and Module's fakes but
// not its lifecycle (controllers do not run), whose stores hold objs, and
// waits for them to sync. The app logs to tb and stops when the test ends.
// A module that fails to build fails the test.
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
		fakes,
		module,
		fx.Populate(&a.controllers, &a.hosted, &a.source, &a.registry, &a.recorder),
	)
	app.RequireStart()
	tb.Cleanup(app.RequireStop)
	fxstoretest.Start(tb, a.registry, a.source)
	return a
}

// Reconcile reconciles the object key names with the named controller, in
// the caller's goroutine, as the running controller would (see
// fxcontroller.Controller.Reconcile): a native one, or one of an operator
// hosted with fxcontroller.SetupWithManager, whose cached client reads from
// the in-memory stores. The stores see what earlier reconciles wrote once
// their watches deliver it, as from an API server; read through Client to
// see it at once. A reconcile that changed an object it read from a store
// fails the test when it ends, naming the object and what changed.
func (a *App) Reconcile(ctx context.Context, controller string, key client.ObjectKey) (reconcile.Result, error) {
	a.tb.Helper()
	req := reconcile.Request{NamespacedName: key}
	for _, h := range a.hosted {
		if slices.Contains(h.Controllers(), controller) {
			return h.Reconcile(ctx, controller, req)
		}
	}
	return a.Controller(controller).Reconcile(ctx, req)
}

// Controller returns the app's native controller with the given name; there
// being none fails the test.
func (a *App) Controller(name string) *fxcontroller.Controller {
	a.tb.Helper()
	i := slices.IndexFunc(a.controllers, func(c *fxcontroller.Controller) bool { return c.Name() == name })
	if i < 0 {
		var names []string
		for _, c := range a.controllers {
			names = append(names, c.Name())
		}
		for _, h := range a.hosted {
			names = append(names, h.Controllers()...)
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

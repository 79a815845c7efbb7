package fxcontroller_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// buildHosted builds, without starting, an app hosting opts, connected to
// an API server it never reaches, and returns fx.New's error.
func buildHosted(t *testing.T, opts ...fx.Option) error {
	t.Helper()
	app := fx.New(fx.NopLogger,
		fx.Supply(&rest.Config{Host: "https://unconnected.invalid"}),
		fxstore.Module,
		fxcontroller.Module,
		fx.Options(opts...),
	)
	return app.Err()
}

func setupConfigMaps(name string) func(manager.Manager) error {
	return func(mgr manager.Manager) error {
		return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named(name).Complete(noop)
	}
}

func failingSetup(manager.Manager) error { return errors.New("no such flag") }

func validating(mgr manager.Manager) error {
	mgr.GetWebhookServer().Register("/validate", &admission.Webhook{})
	return nil
}

func plainHook(mgr manager.Manager) error {
	mgr.GetWebhookServer().Register("/hook", http.NotFoundHandler())
	return nil
}

func panickingSetup(manager.Manager) error { panic("nil map") }

func TestSetupWithManagerBadInput(t *testing.T) {
	tests := []struct {
		name string
		give []fx.Option
		want []string // substrings of fx.New's error
	}{
		{
			name: "setup returns an error",
			give: []fx.Option{fxcontroller.SetupWithManager(failingSetup)},
			want: []string{`hosted operator "fxcontroller_test.failingSetup": setup function fxcontroller_test.failingSetup: no such flag`},
		},
		{
			name: "setup panics",
			give: []fx.Option{fxcontroller.SetupWithManager(panickingSetup)},
			want: []string{`setup function fxcontroller_test.panickingSetup panicked: nil map`},
		},
		{
			name: "nil setup",
			give: []fx.Option{fxcontroller.SetupWithManager(nil)},
			want: []string{"fxcontroller.SetupWithManager: setup function is nil"},
		},
		{
			name: "two hosted operators with one name",
			give: []fx.Option{
				fxcontroller.SetupWithManager(setupConfigMaps("a"), fxcontroller.WithName("ops")),
				fxcontroller.SetupWithManager(setupConfigMaps("b"), fxcontroller.WithName("ops")),
			},
			want: []string{`hosted operator name "ops" is used by both`, "name them apart with fxcontroller.WithName"},
		},
		{
			name: "a hosted controller named as a native one",
			give: []fx.Option{
				fxcontroller.Provide(newRollout),
				fxcontroller.SetupWithManager(setupConfigMaps("rollout"), fxcontroller.WithName("ops")),
			},
			want: []string{`controller name "rollout" is used by both fxcontroller_test.newRollout and hosted operator "ops"`},
		},
		{
			name: "two hosted controllers with one name",
			give: []fx.Option{
				fxcontroller.SetupWithManager(setupConfigMaps("sync"), fxcontroller.WithName("a")),
				fxcontroller.SetupWithManager(setupConfigMaps("sync"), fxcontroller.WithName("b")),
			},
			want: []string{`controller name "sync" is used by both hosted operator "a" and hosted operator "b"`},
		},
		{
			name: "two controllers of one operator with one name",
			give: []fx.Option{fxcontroller.SetupWithManager(func(mgr manager.Manager) error {
				if err := ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(noop); err != nil {
					return err
				}
				return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(noop)
			}, fxcontroller.WithName("ops"))},
			want: []string{`hosted operator "ops": two controllers are named "configmap"; name them apart with the builder's Named`},
		},
		{
			name: "a selector that selects nothing",
			give: []fx.Option{fxcontroller.SetupWithManager(setupConfigMaps("a"), fxcontroller.WithName("ops"),
				fxcontroller.WithCacheOptions(crcache.Options{ByObject: map[client.Object]crcache.ByObject{
					&corev1.ConfigMap{}: {Label: labels.Nothing()},
				}}))},
			want: []string{`hosted operator "ops": cache options of ops: ByObject[*v1.ConfigMap].label selector selects nothing`},
		},
		{
			name: "an invalid namespace",
			give: []fx.Option{fxcontroller.SetupWithManager(setupConfigMaps("a"), fxcontroller.WithName("ops"),
				fxcontroller.WithCacheOptions(crcache.Options{DefaultNamespaces: map[string]crcache.Config{"Not_A_Namespace": {}}}))},
			want: []string{`hosted operator "ops"`, `invalid namespace "Not_A_Namespace"`},
		},
		{
			name: "a resync period",
			give: []fx.Option{fxcontroller.SetupWithManager(setupConfigMaps("a"), fxcontroller.WithName("ops"),
				fxcontroller.WithCacheOptions(crcache.Options{SyncPeriod: new(time.Minute)}))},
			want: []string{"SyncPeriod is not supported: stores do not resync; return reconcile.Result{RequeueAfter: d} to reconcile periodically"},
		},
		{
			name: "one plain webhook path registered by two operators",
			give: []fx.Option{lifecycle.Module,
				fxcontroller.SetupWithManager(plainHook, fxcontroller.WithName("a")),
				fxcontroller.SetupWithManager(plainHook, fxcontroller.WithName("b")),
			},
			want: []string{`webhook path /hook is registered by hosted operator "a" and by hosted operator "b"`, "serve one of them at a path of its own"},
		},
		{
			name: "webhooks without lifecycle.Module",
			give: []fx.Option{fxcontroller.SetupWithManager(validating, fxcontroller.WithName("ops"))},
			want: []string{`hosted operator "ops" registers webhooks ["/validate"], but the app has no lifecycle.Module to serve them; build the app with lifecycle.Options`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := buildHosted(t, tt.give...)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// The manager façade refuses what only a manager of its own could do, with
// an error that says what to do instead.
func TestHostedControllersAreKnownByName(t *testing.T) {
	var hosted fxcontroller.HostedOperators
	require.NoError(t, buildHosted(t,
		fxcontroller.SetupWithManager(func(mgr manager.Manager) error {
			if err := setupConfigMaps("first")(mgr); err != nil {
				return err
			}
			// Unnamed: the builder names it after its kind.
			return ctrl.NewControllerManagedBy(mgr).For(&corev1.Secret{}).Complete(noop)
		}, fxcontroller.WithName("ops")),
		fx.Populate(&hosted),
	))
	require.Len(t, hosted, 1)
	assert.Equal(t, "ops", hosted[0].Name())
	assert.Equal(t, []string{"first", "secret"}, hosted[0].Controllers())
	_, err := hosted[0].Reconcile(context.Background(), "third", reconcile.Request{})
	assert.ErrorContains(t, err, `hosted operator "ops" has no controller "third"; it has ["first" "secret"]`)
}

func TestHostedManagerRefusals(t *testing.T) {
	var mgr manager.Manager
	require.NoError(t, buildHosted(t, fxcontroller.SetupWithManager(func(m manager.Manager) error {
		mgr = m
		return m.AddHealthzCheck("ping", healthz.Ping)
	}, fxcontroller.WithName("ops"))))

	assert.ErrorContains(t, mgr.Start(context.Background()), `hosted operator "ops": the app starts hosted managers; do not call mgr.Start`)
	assert.ErrorContains(t, mgr.Add(manager.RunnableFunc(func(context.Context) error { return nil })),
		"Add after its setup function returned: add runnables in the setup function")
	assert.ErrorContains(t, mgr.AddMetricsServerExtraHandler("/debug", http.NotFoundHandler()), `extra handler "/debug" on the metrics server is not supported`)
	assert.ErrorContains(t, mgr.GetCache().Start(context.Background()), "the app starts and stops its stores")

	var cm corev1.ConfigMap
	err := mgr.GetClient().Get(context.Background(), client.ObjectKey{Namespace: "a", Name: "b"}, &cm)
	var notStarted *crcache.ErrCacheNotStarted
	assert.ErrorAs(t, err, &notStarted, "reads before the app starts fail as controller-runtime's do")

	assert.Equal(t, "https://unconnected.invalid", mgr.GetConfig().Host)
	assert.NotNil(t, mgr.GetHTTPClient())
	assert.NotNil(t, mgr.GetRESTMapper())
	assert.NotNil(t, mgr.GetAPIReader())
	assert.NotNil(t, mgr.GetEventRecorderFor("ops")) //nolint:staticcheck // kubebuilder scaffolds still call it: it must work
	assert.NotNil(t, mgr.GetEventRecorder("ops"))
	opts := mgr.GetControllerOptions()
	assert.True(t, *opts.EnableWarmup, "controllers warm up before the sync barrier")
	assert.True(t, *opts.SkipNameValidation, "names are checked per app: several apps may share a process")
	assert.True(t, *opts.NeedLeaderElection, "controllers run on the leader by default")
	assert.Equal(t, 2*time.Minute, opts.CacheSyncTimeout, "a source syncs within the app's sync timeout")
	assert.NoError(t, mgr.GetWebhookServer().StartedChecker()(nil), "a readiness check on a webhook server with nothing to serve passes")
	select {
	case <-mgr.Elected():
		t.Fatal("elected before the app started")
	default:
	}
}

// A hosted controller's raw sources that are not a store, source.Channel
// and source.Func, run as on controller-runtime's manager: controller-runtime's
// own code starts them, as the controller warms up.
func TestHostedRawSources(t *testing.T) {
	events := make(chan event.GenericEvent, 1)
	seen := make(chan reconcile.Request, 10)
	app := fxtest.New(t,
		fx.Supply(&rest.Config{Host: "https://unconnected.invalid"}),
		fxstore.Module,
		fx.Provide(func(s *k8sruntime.Scheme) fxstore.Source { return fxstoretest.NewSource(s) }),
		fxcontroller.Module,
		fxcontroller.SetupWithManager(func(mgr manager.Manager) error {
			return ctrl.NewControllerManagedBy(mgr).
				Named("raw").
				WatchesRawSource(source.Channel(events, &handler.EnqueueRequestForObject{})).
				WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
					q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "a", Name: "from-func"}})
					return nil
				})).
				Complete(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
					seen <- req
					return reconcile.Result{}, nil
				}))
		}),
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0"}),
	)
	app.RequireStart()
	defer app.RequireStop()
	events <- event.GenericEvent{Object: testenv.ConfigMap("a", "from-channel")}

	var got []string
	for len(got) < 2 {
		select {
		case req := <-seen:
			got = append(got, req.String())
		case <-time.After(10 * time.Second):
			t.Fatalf("reconciled only %q", got)
		}
	}
	assert.ElementsMatch(t, []string{"a/from-channel", "a/from-func"}, got)
}

// Declare, which describe and rbac call on an app that will not start,
// has every controller ask for its stores, even one that also watches a
// cache of the operator's own, which never syncs before the app starts.
func TestDeclareWithACacheOfTheOperatorsOwn(t *testing.T) {
	var (
		hosted   fxcontroller.HostedOperators
		registry *fxstore.Registry
	)
	require.NoError(t, buildHosted(t,
		fxcontroller.SetupWithManager(func(mgr manager.Manager) error {
			own, err := crcache.New(mgr.GetConfig(), crcache.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
			if err != nil {
				return err
			}
			if err := mgr.Add(own); err != nil {
				return err
			}
			if err := setupConfigMaps("first")(mgr); err != nil {
				return err
			}
			return ctrl.NewControllerManagedBy(mgr).
				For(&corev1.Secret{}).
				WatchesRawSource(source.Kind(own, client.Object(&corev1.ServiceAccount{}), &handler.EnqueueRequestForObject{})).
				Complete(noop)
		}, fxcontroller.WithName("ops")),
		fx.Populate(&hosted, &registry),
	))
	require.NoError(t, hosted[0].Declare(t.Context()))
	var kinds []string
	for _, s := range registry.Stores() {
		kinds = append(kinds, s.Key.Kind.Kind)
	}
	assert.ElementsMatch(t, []string{"ConfigMap", "Secret"}, kinds, "the app's stores; the ServiceAccounts are in the operator's cache")
}

// A hosted controller whose warm-up waits for a cache that never starts
// (made, but not added with mgr.Add) fails the start at the sync timeout
// with the warm-up's own error, which names the controller and the source
// that did not sync; it says "stores not synced" no more.
func TestHostedWarmupWaitingOnACacheNeverStarted(t *testing.T) {
	app := fx.New(fx.NopLogger,
		fx.Supply(&rest.Config{Host: "https://unconnected.invalid"}),
		fxstore.Module,
		fx.Provide(func(s *k8sruntime.Scheme) fxstore.Source { return fxstoretest.NewSource(s) }),
		fxcontroller.Module,
		fxcontroller.SetupWithManager(func(mgr manager.Manager) error {
			own, err := crcache.New(mgr.GetConfig(), crcache.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
			if err != nil {
				return err
			}
			return ctrl.NewControllerManagedBy(mgr).
				For(&corev1.ConfigMap{}).
				Named("waiting").
				WatchesRawSource(source.Kind(own, client.Object(&corev1.ServiceAccount{}), &handler.EnqueueRequestForObject{})).
				Complete(noop)
		}, fxcontroller.WithName("ops")),
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0", SyncTimeout: time.Second}),
	)
	require.NoError(t, app.Err())
	err := app.Start(t.Context())
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), `warm up controller "waiting" of hosted operator "ops"`)
	assert.Contains(t, err.Error(), "timed out waiting for cache to be synced for kind source: *v1.ServiceAccount")
	assert.NotContains(t, err.Error(), "stores not synced", "every store synced")
}

// lines is a logr.Logger's output, line by line, safe for concurrent use.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, prefix+" "+args)
}

func (l *lines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

// A hosted operator given its manager's logr.Logger (ctrl.Options.Logger)
// with WithLogr logs through it: mgr.GetLogger, and the reconciles of its
// controllers, with controller-runtime's names and values.
func TestWithLogrCarriesThroughToControllers(t *testing.T) {
	var out lines
	logger := funcr.New(out.add, funcr.Options{})
	reconciled := make(chan struct{}, 1)
	app := fxtest.New(t,
		fx.Supply(&rest.Config{Host: "https://unconnected.invalid"}),
		fxstore.Module,
		fx.Provide(func(s *k8sruntime.Scheme) fxstore.Source {
			return fxstoretest.NewSource(s, testenv.ConfigMap("a", "x"))
		}),
		fxcontroller.Module,
		fxcontroller.SetupWithManager(func(mgr manager.Manager) error {
			mgr.GetLogger().Info("set up")
			return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("configs").Complete(
				reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
					ctrllog.FromContext(ctx).Info("reconciled")
					select {
					case reconciled <- struct{}{}:
					default:
					}
					return reconcile.Result{}, nil
				}))
		}, fxcontroller.WithName("ops"), fxcontroller.WithLogr(logger)),
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0"}),
	)
	app.RequireStart()
	select {
	case <-reconciled:
	case <-time.After(10 * time.Second):
		t.Fatal("the controller did not reconcile")
	}
	app.RequireStop()
	got := out.get()
	assert.Contains(t, got, `ops "level"=0 "msg"="set up"`, "mgr.GetLogger is the logger given, named after the operator")
	var reconciles []string
	for _, line := range got {
		if strings.Contains(line, `"msg"="reconciled"`) {
			reconciles = append(reconciles, line)
		}
	}
	require.NotEmpty(t, reconciles, "the reconcile logged through the logger given: %q", got)
	assert.Contains(t, reconciles[0], `"controller"="configs"`)
	assert.Contains(t, reconciles[0], `"ConfigMap"={"name"="x" "namespace"="a"}`)
}

// A hosted operator is given one logger.
func TestWithLogrAndWithLoggerConflict(t *testing.T) {
	err := buildHosted(t, fxcontroller.SetupWithManager(setupConfigMaps("a"), fxcontroller.WithName("ops"),
		fxcontroller.WithLogger(zap.NewNop().Named("z")),
		fxcontroller.WithLogr(funcr.New(func(string, string) {}, funcr.Options{}))))
	assert.ErrorContains(t, err, `fxcontroller.WithLogger(logger "z") and fxcontroller.WithLogr(*funcr.fnlogger) each set the logger; give one`)
	err = buildHosted(t, fxcontroller.SetupWithManager(setupConfigMaps("a"), fxcontroller.WithLogr(logr.Logger{})))
	assert.ErrorContains(t, err, "WithLogr: the logger has no sink (a zero logr.Logger); pass the operator's logger, such as ctrl.Log")
}

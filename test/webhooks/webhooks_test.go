// Package webhooks_test runs an operator's admission and conversion
// webhooks, registered as kubebuilder scaffolds them
// (ctrl.NewWebhookManagedBy in a SetupWithManager), on an fxkube app
// against a real API server: envtest installs the webhook configurations,
// the CRD's conversion webhook and the serving certificates, as a
// kubebuilder project's suite_test.go has it do.
package webhooks_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/lifecycle/lifecycletest"
	v1 "github.com/fxkube/fxkube/test/webhooks/api/v1"
	v2 "github.com/fxkube/fxkube/test/webhooks/api/v2"
	"github.com/fxkube/fxkube/test/webhooks/internal/webhook"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1.AddToScheme(scheme))
	utilruntime.Must(v2.AddToScheme(scheme))
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testenv.WithControlPlane(m))
}

// timeout bounds each wait; generous, for -race on a small machine.
const timeout = 30 * time.Second

// setUp installs the Widget CRD, its conversion webhook and the admission
// webhook configurations, pointed at a new local server, and stores a v1
// Widget in namespace, before any webhook serves: creating the storage
// version needs none. The Widgets in namespace are deleted when the test
// ends.
func setUp(t *testing.T, namespace string) (envtest.WebhookInstallOptions, client.Client) {
	t.Helper()
	return setUpServing(t, namespace, nil)
}

// setUpServing is setUp, with the webhook server's certificate trusted by
// the API server as caPEM, if not nil, in place of the one envtest
// writes, whose files are removed.
func setUpServing(t *testing.T, namespace string, caPEM []byte) (envtest.WebhookInstallOptions, client.Client) {
	t.Helper()
	cfg := testenv.Config(t)
	hooks := envtest.WebhookInstallOptions{
		Paths:            []string{filepath.Join("config", "webhook")},
		LocalServingHost: "127.0.0.1",
		MaxTime:          timeout,
	}
	require.NoError(t, hooks.PrepWithoutInstalling(), "make the serving certificates")
	t.Cleanup(func() { assert.NoError(t, hooks.Cleanup()) })
	if caPEM != nil {
		dir := hooks.LocalServingCertDir
		require.NoError(t, os.RemoveAll(dir), "remove envtest's certificate files")
		require.NoDirExists(t, dir)
		hooks.LocalServingCertDir, hooks.LocalServingCAData = "", caPEM
		require.NoError(t, hooks.ModifyWebhookDefinitions(), "point the webhook configurations' caBundle at caPEM")
	}
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Scheme:             scheme,
		Paths:              []string{filepath.Join("config", "crd")},
		ErrorIfPathMissing: true,
		WebhookOptions:     hooks,
		MaxTime:            timeout,
	})
	require.NoError(t, err, "install the CRD, its conversion webhook pointed at the test's server")
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	ctx := t.Context()
	require.NoError(t, client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})))
	require.NoError(t, client.IgnoreAlreadyExists(c.Create(ctx, &v1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "stored"}, Spec: v1.WidgetSpec{Size: 3}})))
	// The namespace outlives the test, so its Widgets must not: a controller
	// of all Widgets in a later run would see them.
	t.Cleanup(func() {
		assert.NoError(t, c.DeleteAllOf(context.Background(), &v1.Widget{}, client.InNamespace(namespace)))
	})
	require.NoError(t, hooks.Install(cfg), "install the admission webhook configurations")
	t.Cleanup(func() { uninstallWebhooks(t, c, hooks) })
	return hooks, c
}

// newApp is an fxkube app with the Widget types, serving webhooks where
// hooks says, and modules.
func newApp(t *testing.T, hooks envtest.WebhookInstallOptions, probes string, modules ...fx.Option) *fxtest.App {
	t.Helper()
	cfg := lifecycletest.EnvtestConfig(hooks)
	cfg.HealthProbeBindAddress, cfg.SyncTimeout = probes, timeout
	return testenv.App(t, testenv.Config(t), cfg, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
		fxstore.AddToScheme(v1.AddToScheme, v2.AddToScheme),
		fxcontroller.Module,
		fx.Options(modules...),
	)
}

// TestWebhooks runs the Widget operator on fxkube: Widgets are stored as
// v1 and read by the operator as v2, so its store syncs only through the
// conversion webhook, which must serve before the store lists; kubectl's
// requests are defaulted and validated by the admission webhooks; and
// certificate files replaced while the app runs are served from then on.
func TestWebhooks(t *testing.T) {
	const ns = "widgets-hosted"
	hooks, c := setUp(t, ns)
	ctx := t.Context()
	probes := testenv.LoopbackAddr(t)
	seen := make(chan reconcile.Request, 10)
	app := newApp(t, hooks, probes,
		fxcontroller.SetupWithManager(widgetOperator(seen), fxcontroller.WithName("widget-operator")),
	)
	// Start returns once every store has synced: the v2 store's list of
	// v1-stored Widgets went through /convert.
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	requireReconciled(t, seen, "stored")
	resp, err := http.Get("http://" + probes + "/readyz?verbose")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), "webhooks", "the webhook server's check is on /readyz")

	t.Run("conversion", func(t *testing.T) {
		var w v2.Widget
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stored"}, &w))
		assert.Equal(t, int32(3), w.Spec.Replicas, "v1's size is v2's replicas")
	})

	t.Run("defaulting", func(t *testing.T) {
		kubectl(t, widgetYAML(ns, "defaulted", 0), "apply", "-f", "-")
		out := kubectl(t, "", "get", "widgets.v2.webhooks.example.fxkube.io", "-n", ns, "defaulted", "-o", "jsonpath={.spec.replicas}")
		assert.Equal(t, "1", out, "the defaulting webhook set replicas")
	})

	t.Run("validation", func(t *testing.T) {
		out, err := tryKubectl(t, widgetYAML(ns, "too-big", webhook.MaxReplicas+1), "apply", "-f", "-")
		require.Error(t, err, "kubectl apply of an invalid Widget is rejected: %s", out)
		assert.Contains(t, err.Error(), fmt.Sprintf("spec.replicas: %d is more than %d", webhook.MaxReplicas+1, webhook.MaxReplicas))
		err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "too-big"}, &v2.Widget{})
		assert.True(t, apierrors.IsNotFound(err), "nothing was stored: %v", err)
		kubectl(t, widgetYAML(ns, "just-right", webhook.MaxReplicas), "apply", "-f", "-")
	})

	t.Run("certificate reloaded", func(t *testing.T) {
		addr := net.JoinHostPort(hooks.LocalServingHost, strconv.Itoa(hooks.LocalServingPort))
		before := servedCertificate(t, addr)
		rotated := testenv.WriteServingCertificate(t, hooks.LocalServingCertDir)
		require.Eventually(t, func() bool {
			return bytes.Equal(servedCertificate(t, addr), rotated)
		}, timeout, 100*time.Millisecond, "the replaced certificate is served")
		assert.NotEqual(t, before, rotated)
	})
}

// memorySource serves a webhook certificate held in memory, as
// approver-policy's dynamic source does. The operator runs it (mgr.Add),
// and the webhook server asks it for the certificate of each handshake.
type memorySource struct {
	cert    tls.Certificate
	running atomic.Bool
}

func (s *memorySource) Start(ctx context.Context) error {
	s.running.Store(true)
	<-ctx.Done()
	return nil
}

func (s *memorySource) NeedLeaderElection() bool { return false }

func (s *memorySource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return &s.cert, nil
}

// TestWebhookCertificateFromMemory hosts an operator that serves its
// webhook certificate from memory, through lifecycle.WebhookTLS: no
// certificate file exists, and the API server's conversion and admission
// calls succeed, trusting that certificate.
func TestWebhookCertificateFromMemory(t *testing.T) {
	const ns = "widgets-memory"
	cert, certPEM := testenv.ServingCertificate(t)
	hooks, c := setUpServing(t, ns, certPEM)
	// envtest's certificate files are gone; the app is given none.
	require.Empty(t, hooks.LocalServingCertDir)
	source := &memorySource{cert: cert}
	seen := make(chan reconcile.Request, 10)
	app := newApp(t, hooks, "0",
		lifecycle.WebhookTLS(func(c *tls.Config) { c.GetCertificate = source.GetCertificate }),
		fxcontroller.SetupWithManager(widgetOperator(seen, func(mgr ctrl.Manager) error { return mgr.Add(source) }),
			fxcontroller.WithName("memory-operator")),
	)
	// The v2 store's list of v1-stored Widgets went through /convert,
	// which the API server called trusting the certificate in memory.
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	requireReconciled(t, seen, "stored")
	assert.True(t, source.running.Load(), "the operator's source runs")

	addr := net.JoinHostPort(hooks.LocalServingHost, strconv.Itoa(hooks.LocalServingPort))
	assert.Equal(t, cert.Certificate[0], servedCertificate(t, addr), "the certificate in memory is served")
	var w v2.Widget
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "stored"}, &w), "conversion")
	assert.Equal(t, int32(3), w.Spec.Replicas)
	kubectl(t, widgetYAML(ns, "defaulted", 0), "apply", "-f", "-")
	assert.Equal(t, "1", kubectl(t, "", "get", "widgets.v2.webhooks.example.fxkube.io", "-n", ns, "defaulted", "-o", "jsonpath={.spec.replicas}"),
		"the defaulting webhook set replicas")
	_, err := tryKubectl(t, widgetYAML(ns, "too-big", webhook.MaxReplicas+1), "apply", "-f", "-")
	assert.ErrorContains(t, err, "is more than", "the validating webhook answered")
}

// TestFxNativeWebhooks registers the same webhooks without a hosted
// manager: admission handlers from controller-runtime's admission package
// and the conversion webhook, from an fx.Invoke on the app's
// *lifecycle.Webhooks.
func TestFxNativeWebhooks(t *testing.T) {
	const ns = "widgets-native"
	hooks, _ := setUp(t, ns)
	var widgets *fxstore.Store[*v2.Widget]
	app := newApp(t, hooks, "0",
		fx.Invoke(func(w *lifecycle.Webhooks, s *runtime.Scheme) {
			w.RegisterConversion(s)
			w.Register("/mutate-webhooks-example-fxkube-io-v2-widget", admission.WithDefaulter(s, &webhook.WidgetDefaulter{}))
			w.Register("/validate-webhooks-example-fxkube-io-v2-widget", admission.WithValidator(s, &webhook.WidgetValidator{}))
		}),
		fx.Invoke(func(r *fxstore.Registry) (err error) {
			widgets, err = fxstore.For[*v2.Widget](r, fxstore.Spec{Namespace: ns})
			return err
		}),
	)
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	stored, err := widgets.Get(ns, "stored")
	require.NoError(t, err, "the v2 store synced through /convert")
	assert.Equal(t, int32(3), stored.Spec.Replicas)

	kubectl(t, widgetYAML(ns, "defaulted", 0), "apply", "-f", "-")
	assert.Equal(t, "1", kubectl(t, "", "get", "widgets.v2.webhooks.example.fxkube.io", "-n", ns, "defaulted", "-o", "jsonpath={.spec.replicas}"))
	_, err = tryKubectl(t, widgetYAML(ns, "too-big", webhook.MaxReplicas+1), "apply", "-f", "-")
	assert.ErrorContains(t, err, "is more than")
	require.Eventually(t, func() bool {
		w, err := widgets.Get(ns, "defaulted")
		return err == nil && w.Spec.Replicas == 1
	}, timeout, 50*time.Millisecond, "the store sees the defaulted Widget")
}

func widgetYAML(namespace, name string, replicas int32) string {
	spec := "{}"
	if replicas != 0 {
		spec = fmt.Sprintf("{replicas: %d}", replicas)
	}
	return fmt.Sprintf("apiVersion: webhooks.example.fxkube.io/v2\nkind: Widget\nmetadata: {namespace: %s, name: %s}\nspec: %s\n", namespace, name, spec)
}

// tryKubectl runs the control plane's kubectl against it, as a user would.
func tryKubectl(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	return testenv.Kubectl(t, t.TempDir(), stdin, args...)
}

func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := tryKubectl(t, stdin, args...)
	require.NoError(t, err)
	return out
}

// uninstallWebhooks removes the webhook configurations, which would
// otherwise outlive the server they point at.
func uninstallWebhooks(t *testing.T, c client.Client, hooks envtest.WebhookInstallOptions) {
	ctx := context.Background()
	for _, h := range hooks.MutatingWebhooks {
		assert.NoError(t, client.IgnoreNotFound(c.Delete(ctx, h)))
	}
	for _, h := range hooks.ValidatingWebhooks {
		assert.NoError(t, client.IgnoreNotFound(c.Delete(ctx, h)))
	}
}

// servedCertificate returns the DER of the certificate the server at addr
// presents.
func servedCertificate(t *testing.T, addr string) []byte {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads the certificate, it does not trust it
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].Raw
}

// widgetOperator is the widget operator's setup: its webhooks, and a
// controller of v2 Widgets that sends each request it reconciles to seen.
// Setups of its own run first.
func widgetOperator(seen chan<- reconcile.Request, setups ...func(ctrl.Manager) error) func(ctrl.Manager) error {
	return func(mgr ctrl.Manager) error {
		for _, setup := range setups {
			if err := setup(mgr); err != nil {
				return err
			}
		}
		if err := webhook.SetupWidgetWebhookWithManager(mgr); err != nil {
			return err
		}
		return ctrl.NewControllerManagedBy(mgr).For(&v2.Widget{}).Complete(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			select {
			case seen <- req:
			default:
			}
			return reconcile.Result{}, nil
		}))
	}
}

// requireReconciled waits for the controller to reconcile the Widget name.
func requireReconciled(t *testing.T, seen <-chan reconcile.Request, name string) {
	t.Helper()
	select {
	case req := <-seen:
		assert.Equal(t, name, req.Name)
	case <-time.After(timeout):
		t.Fatalf("the controller did not reconcile the Widget %q", name)
	}
}

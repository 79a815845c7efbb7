package test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// gadgets is the kind of the CRD the served tests install and delete.
var gadgets = schema.GroupVersionKind{Group: "served.fxkube.io", Version: "v1", Kind: "Gadget"}

func gadgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.served.fxkube.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gadgets.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: gadgets.Kind, ListKind: "GadgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gadgets.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: new(true),
				}},
			}},
		},
	}
}

// gadgetsController is a controller of every Gadget that waits for its
// kind, and the requests it reconciled.
type gadgetsController struct {
	reconciled chan reconcile.Request
}

func (g *gadgetsController) module() fx.Option {
	return fx.Options(fxcontroller.Module, fxcontroller.Provide(func(reg *fxstore.Registry) (*fxcontroller.Controller, error) {
		store, err := fxstore.For[*unstructured.Unstructured](reg, fxstore.Spec{Kind: gadgets}, fxstore.WithConsumer("gadgets"))
		if err != nil {
			return nil, err
		}
		return fxcontroller.New("gadgets", store, reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			select {
			case g.reconciled <- req:
			default:
			}
			return reconcile.Result{}, nil
		}), fxcontroller.WhenServed())
	}))
}

// crdClient returns a client that writes CRDs and Gadgets.
func crdClient(t *testing.T) client.Client {
	scheme := k8sruntime.NewScheme()
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(testenv.Config(t), client.Options{Scheme: scheme})
	require.NoError(t, err)
	return c
}

// installGadgets creates the Gadget CRD and returns once the API server
// says it is established, and when it saw that.
func installGadgets(t *testing.T, c client.Client) time.Time {
	ctx := t.Context()
	require.NoError(t, c.Create(ctx, gadgetCRD()))
	var established time.Time
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: gadgetCRD().Name}, crd); err != nil {
			return false, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				established = time.Now()
				return true, nil
			}
		}
		return false, nil
	}))
	return established
}

// deleteGadgets deletes the Gadget CRD and waits until it is gone.
func deleteGadgets(t *testing.T, c client.Client) {
	ctx := t.Context()
	require.NoError(t, c.Delete(ctx, gadgetCRD()))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: gadgetCRD().Name}, &apiextensionsv1.CustomResourceDefinition{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}))
}

func newGadget(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gadgets)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// A controller that waits for its kind, while the CRD is installed after
// the app starts, deleted and installed again, three times: it reconciles
// its first object soon after the CRD is established, stops when the CRD
// goes, with a few log lines whatever the time, and runs again.
func TestControllerRunsWhileItsKindIsServed(t *testing.T) {
	c := crdClient(t)
	kube, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "served")
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Core()))
	g := &gadgetsController{reconciled: make(chan reconcile.Request, 100)}
	var (
		reg   *fxstore.Registry
		ctrls fxcontroller.Controllers
	)
	a := testenv.App(t, testenv.Config(t), lifecycle.Config{StopTimeout: 5 * time.Second}, log, g.module(), fx.Populate(&reg, &ctrls))
	a.RequireStart()
	t.Cleanup(a.RequireStop)
	ctrl := ctrls[0]
	require.Eventually(t, func() bool { return ctrl.Status().State == fxcontroller.Waiting }, 10*time.Second, 10*time.Millisecond)
	key := fxstore.Key{Kind: gadgets, Projection: fxstore.Unstructured, Transform: fxstore.StripManagedFields.Name}

	for cycle := range 3 {
		established := installGadgets(t, c)
		require.Eventually(t, func() bool { return ctrl.Status().State == fxcontroller.Running }, time.Minute, time.Millisecond,
			"cycle %d: the controller runs once its CRD is established", cycle)
		running := time.Since(established)
		// The API server may answer 404 for a moment after it says the
		// CRD is established.
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := c.Create(ctx, newGadget(ns, fmt.Sprintf("g-%d", cycle)))
			return err == nil, client.IgnoreNotFound(err)
		}))
		created := time.Now()
		select {
		case req := <-g.reconciled:
			sync := testenv.StoreInfo(t, reg, key).Status.SyncDuration
			t.Logf("cycle %d: the CRD established, the controller ran %s later (its store synced in %s); the API server took %s to accept the first Gadget, reconciled (%s) %s after that, %s after the CRD was established",
				cycle, running.Round(time.Millisecond), sync.Round(time.Millisecond), created.Sub(established).Round(time.Millisecond),
				req.Name, time.Since(created).Round(time.Millisecond), time.Since(established).Round(time.Millisecond))
		case <-time.After(time.Minute):
			t.Fatalf("cycle %d: no reconcile within a minute of the CRD being established", cycle)
		}

		before := logs.Len()
		deleted := time.Now()
		deleteGadgets(t, c)
		require.Eventually(t, func() bool { return ctrl.Status().State == fxcontroller.Waiting }, time.Minute, 10*time.Millisecond,
			"cycle %d: the controller waits once its CRD is gone", cycle)
		stopped := time.Since(deleted)
		require.True(t, testenv.StoreInfo(t, reg, key).Status.WaitingForKind, "its store has stopped")
		time.Sleep(3 * time.Second)
		gained := logs.All()[before:]
		var lines []string
		for _, e := range gained {
			lines = append(lines, e.LoggerName+": "+e.Message)
		}
		t.Logf("cycle %d: stopped %s after the delete began; the log gained %d lines in the 3s after:\n%s", cycle, stopped.Round(time.Millisecond), len(gained), strings.Join(lines, "\n"))
		assert.LessOrEqual(t, len(gained), 8, "cycle %d: a few lines, not one per retry", cycle)
		for _, e := range gained {
			assert.Less(t, e.Level, zapcore.ErrorLevel, "cycle %d: %s", cycle, e.Message)
		}
		// Whatever the time: the next seconds add nothing. A retry
		// logged with backoff would add a line within them.
		quiet := logs.Len()
		time.Sleep(4 * time.Second)
		assert.Empty(t, logs.All()[quiet:], "cycle %d: nothing more while the kind is gone", cycle)
	}
	assert.Equal(t, 3.0, testenv.Metric(t, ctrls, "fxkube_controller_starts_total", nil), "three runs")
	assert.Equal(t, 3.0, testenv.Metric(t, ctrls, "fxkube_controller_stops_total", map[string]string{"reason": "kind_not_served"}))
}

// An app whose controller waits for a kind not served starts, ready, and
// says the controller waits: describe, /readyz?verbose and the state
// metric.
func TestAppStartsWithoutAControllerWaitingForItsKind(t *testing.T) {
	probes := testenv.LoopbackAddr(t)
	g := &gadgetsController{reconciled: make(chan reconcile.Request, 1)}
	var (
		reg   *fxstore.Registry
		ctrls fxcontroller.Controllers
	)
	a := testenv.App(t, testenv.Config(t), lifecycle.Config{HealthProbeBindAddress: probes}, zaptest.NewLogger(t),
		g.module(), fx.Populate(&reg, &ctrls))
	a.RequireStart()
	t.Cleanup(a.RequireStop)

	require.Eventually(t, func() bool { return testenv.Status(probes, "/readyz") == http.StatusOK }, 10*time.Second, 10*time.Millisecond)
	resp, err := http.Get("http://" + probes + "/readyz?verbose")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), `[+]info: controller "gadgets" is waiting for kind Gadget.served.fxkube.io/v1 to be served`)
	assert.Contains(t, string(body), "healthz check passed")

	graph := app.NewGraph(reg, ctrls, nil)
	require.Len(t, graph.Controllers, 1)
	assert.True(t, graph.Controllers[0].WhenServed)
	assert.Equal(t, "waiting for kind Gadget.served.fxkube.io/v1 to be served", graph.Controllers[0].State)
	var text strings.Builder
	graph.WriteText(&text)
	assert.Contains(t, text.String(), "state: waiting for kind Gadget.served.fxkube.io/v1 to be served")

	assert.Equal(t, 1.0, testenv.Metric(t, ctrls, "fxkube_controller_state", map[string]string{"controller": "gadgets", "state": "waiting"}))
	assert.Equal(t, 0.0, testenv.Metric(t, ctrls, "fxkube_controller_state", map[string]string{"controller": "gadgets", "state": "running"}))
	assert.True(t, testenv.StoreInfo(t, reg, fxstore.Key{Kind: gadgets, Projection: fxstore.Unstructured, Transform: fxstore.StripManagedFields.Name}).Status.WaitingForKind)
}

package reliability

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

var (
	widgetKind = schema.GroupVersionKind{Group: "reliability.fxkube.io", Version: "v1", Kind: "Widget"}
	crdKind    = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
)

const widgetCRD = "widgets.reliability.fxkube.io"

// newWidgetCRD returns the CustomResourceDefinition of Widgets.
func newWidgetCRD() *unstructured.Unstructured {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": widgetCRD},
		"spec": map[string]any{
			"group": widgetKind.Group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type":                                 "object",
					"x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	crd.SetGroupVersionKind(crdKind)
	return crd
}

// installWidgets creates the Widget CRD and waits until Widgets can be
// created.
func installWidgets(t *testing.T, c client.Client) {
	t.Helper()
	require.NoError(t, c.Create(t.Context(), newWidgetCRD()))
	require.Eventually(t, func() bool {
		err := c.List(t.Context(), newWidgetList(), client.InNamespace("default"))
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "Widgets are served")
}

// uninstallWidgets deletes the Widget CRD, and with it every Widget, and
// waits until it is gone.
func uninstallWidgets(t *testing.T, c client.Client) {
	t.Helper()
	crd := newWidgetCRD()
	require.NoError(t, c.Delete(t.Context(), crd))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(t.Context(), client.ObjectKeyFromObject(crd), newWidgetCRD()))
	}, 30*time.Second, 100*time.Millisecond, "the CRD is deleted")
}

func newWidgetList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(widgetKind.GroupVersion().WithKind("WidgetList"))
	return l
}

func createWidget(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetKind)
	w.SetNamespace(ns)
	w.SetName(name)
	require.NoError(t, c.Create(t.Context(), w))
}

// seenKeys records the requests a reconciler was called with.
type seenKeys struct {
	mu   sync.Mutex
	keys map[string]int
}

func (s *seenKeys) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = make(map[string]int)
	}
	s.keys[req.String()]++
	return reconcile.Result{}, nil
}

func (s *seenKeys) seen(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key] > 0
}

// TestCRDDeletedAndRecreated deletes the CRD of a running app's store and
// creates it again: the app keeps serving its other store, reports the
// broken one in its metrics and logs, and recovers once the CRD is back.
func TestCRDDeletedAndRecreated(t *testing.T) {
	ctx := t.Context()
	admin := newClient(t, testenv.Config(t))
	const ns = "crd"
	require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	installWidgets(t, admin)
	createWidget(t, admin, ns, "before")

	metricsAddr, probesAddr := testenv.LoopbackAddr(t), testenv.LoopbackAddr(t)
	log, logs := newLogger(t, zap.WarnLevel)
	var (
		registry                *fxstore.Registry
		widgets                 *fxstore.Store[*unstructured.Unstructured]
		onWidgets, onConfigMaps seenKeys
	)
	app := testenv.App(t, testenv.Config(t), lifecycle.Config{MetricsBindAddress: metricsAddr, HealthProbeBindAddress: probesAddr}, log,
		fxcontroller.Module,
		fxcontroller.Provide(func(r *fxstore.Registry) (c *fxcontroller.Controller, err error) {
			registry = r
			if widgets, err = fxstore.For[*unstructured.Unstructured](r, fxstore.Spec{Kind: widgetKind, Namespace: ns}); err != nil {
				return nil, err
			}
			return fxcontroller.New("widgets", widgets, &onWidgets)
		}),
		fxcontroller.Provide(func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
			cms, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: ns})
			if err != nil {
				return nil, err
			}
			return fxcontroller.New("configmaps", cms, &onConfigMaps)
		}),
	)
	app.RequireStart()
	defer app.RequireStop()
	store := widgets.String()
	require.Eventually(t, func() bool { return onWidgets.seen(ns + "/before") }, 10*time.Second, 50*time.Millisecond)
	errorsBefore := scrapeMetrics(t, metricsAddr).value("fxkube_store_list_watch_errors_total", map[string]string{"store": store})

	uninstallWidgets(t, admin)
	deleted := time.Now()
	require.Eventually(t, func() bool {
		n, err := widgets.Count()
		return err == nil && n == 0
	}, 10*time.Second, 50*time.Millisecond, "deleting the CRD deletes the Widgets, and the store sees it")

	// Broken, and reported: in the metrics and in the logs.
	var errorsDuring float64
	require.Eventually(t, func() bool {
		errorsDuring = scrapeMetrics(t, metricsAddr).value("fxkube_store_list_watch_errors_total", map[string]string{"store": store})
		return errorsDuring > errorsBefore
	}, 30*time.Second, 100*time.Millisecond, "the broken store's list/watch errors are counted")
	t.Logf("the store's first error was counted %s after the CRD went", time.Since(deleted))
	reported := logs.FilterMessageSnippet("store failing").FilterField(zap.Stringer("store", widgets.Key()))
	require.NotZero(t, reported.Len(), "the broken store is logged")
	t.Logf("logged: %s", reported.All()[0].ContextMap()["error"])
	info := testenv.StoreInfo(t, registry, widgets.Key())
	require.Error(t, info.Status.LastError)
	assert.True(t, apierrors.IsNotFound(info.Status.LastError), "the store's last error says its resource is not found: %v", info.Status.LastError)

	// The other store and its controller carry on.
	require.NoError(t, admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "during"}}))
	require.Eventually(t, func() bool { return onConfigMaps.seen(ns + "/during") }, 10*time.Second, 50*time.Millisecond,
		"the ConfigMap controller reconciles while the Widget store is broken")
	assert.Equal(t, 200, statusOf(t, probesAddr, "/healthz"), "the process stays healthy")

	// Back.
	installWidgets(t, admin)
	back := time.Now()
	createWidget(t, admin, ns, "after")
	require.Eventually(t, func() bool { return onWidgets.seen(ns + "/after") }, time.Minute, 100*time.Millisecond,
		"the Widget store recovers and its controller reconciles new Widgets")
	t.Logf("recovered %s after the CRD came back", time.Since(back))
	got, err := widgets.List()
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "after", got[0].GetName())
	m := scrapeMetrics(t, metricsAddr)
	assert.Equal(t, 1.0, m.value("fxkube_store_objects", map[string]string{"store": store}))
	assert.Equal(t, 1.0, m.value("fxkube_store_synced", map[string]string{"store": store}))
	errorsAfter := m.value("fxkube_store_list_watch_errors_total", map[string]string{"store": store})
	t.Logf("%v list/watch errors counted while the CRD was gone", errorsAfter-errorsBefore)
	time.Sleep(3 * time.Second)
	assert.Equal(t, errorsAfter, scrapeMetrics(t, metricsAddr).value("fxkube_store_list_watch_errors_total", map[string]string{"store": store}),
		"no more errors once recovered")
	assert.NoError(t, testenv.StoreInfo(t, registry, widgets.Key()).Status.LastError, "a recovered store reports no error")
	assert.NotZero(t, logs.FilterMessage("store recovered").FilterField(zap.Stringer("store", widgets.Key())).Len(),
		"the recovery is logged")
	uninstallWidgets(t, admin)
}

func statusOf(t *testing.T, addr, path string) int {
	t.Helper()
	resp, err := httpClient.Get(fmt.Sprintf("http://%s%s", addr, path))
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode
}

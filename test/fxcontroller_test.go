package test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// seen is what a reconcile saw: the controller, the request, and the
// ConfigMap's "version" read from the controller's own store.
type seen struct {
	controller string
	key        string
	version    string
}

// annotateModule reconciles the ConfigMaps in ns (its primary store): it
// annotates each with its version and records an Event, then reports what it
// saw.
func annotateModule(ns string, seenCh chan<- seen) fx.Option {
	return fx.Module("annotate", fxcontroller.Provide(
		func(stores *fxstore.Registry, c client.Client, recorders fxcontroller.RecorderProvider) (*fxcontroller.Controller, error) {
			cms, err := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{Namespace: ns})
			if err != nil {
				return nil, err
			}
			events := recorders.GetEventRecorder("annotate")
			return fxcontroller.New("annotate", cms, reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				cm, err := cms.Get(req.Namespace, req.Name)
				if err != nil {
					return reconcile.Result{}, client.IgnoreNotFound(err)
				}
				version := cm.Data["version"]
				if cm.Annotations["version"] != version {
					patch := client.MergeFrom(cm)
					cm = cm.DeepCopy() // the store's object is shared
					metav1.SetMetaDataAnnotation(&cm.ObjectMeta, "version", version)
					if err := c.Patch(ctx, cm, patch); err != nil {
						return reconcile.Result{}, err
					}
					events.Eventf(cm, nil, corev1.EventTypeNormal, "Annotated", "Annotate", "version %s", version)
				}
				seenCh <- seen{"annotate", req.String(), version}
				return reconcile.Result{}, nil
			}), fxcontroller.Writes(corev1.Resource("configmaps"), "patch"))
		}))
}

// mirrorModule reconciles the Secrets in ns; ConfigMaps (a secondary store)
// map to the Secret of the same name.
func mirrorModule(ns string, seenCh chan<- seen) fx.Option {
	return fx.Module("mirror", fxcontroller.Provide(
		func(stores *fxstore.Registry) (*fxcontroller.Controller, error) {
			spec := fxstore.Spec{Namespace: ns}
			secrets, err := fxstore.For[*corev1.Secret](stores, spec)
			if err != nil {
				return nil, err
			}
			cms, err := fxstore.For[*corev1.ConfigMap](stores, spec)
			if err != nil {
				return nil, err
			}
			return fxcontroller.New("mirror", secrets, reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
				var version string
				if cm, err := cms.Get(req.Namespace, req.Name); err == nil {
					version = cm.Data["version"]
				}
				seenCh <- seen{"mirror", req.String(), version}
				return reconcile.Result{}, nil
			}), fxcontroller.Watches(cms, handler.EnqueueRequestsFromMapFunc(
				func(_ context.Context, cm client.Object) []reconcile.Request {
					return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(cm)}}
				})))
		}))
}

// TestControllersShareStores runs two controllers, in two modules, on the
// same ConfigMap spec: one reconciles ConfigMaps, the other Secrets it maps
// ConfigMaps to. A ConfigMap change reaches both, through one watch.
func TestControllersShareStores(t *testing.T) {
	cfg := testenv.Config(t)
	ctx := t.Context()
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")
	cms := kube.CoreV1().ConfigMaps(ns)
	_, err = cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"version": "1"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	seenCh := make(chan seen, 100)
	var controllers fxcontroller.Controllers
	app := testenv.App(t, cfg, lifecycle.Config{}, zaptest.NewLogger(t),
		fxcontroller.Module,
		annotateModule(ns, seenCh),
		mirrorModule(ns, seenCh),
		fx.Populate(&controllers),
	)
	require.Len(t, controllers, 2)
	require.Equal(t, controllers[0].Info().Primary, controllers[1].Info().Secondary[0], "both controllers use one ConfigMap spec")
	before := scrapeRequests(t, cfg, "configmaps")
	app.RequireStart()
	defer app.RequireStop()

	key := ns + "/settings"
	// waitFor waits until every controller has reconciled key having seen
	// version in its store.
	waitFor := func(version string) {
		t.Helper()
		want := map[string]bool{"annotate": true, "mirror": true}
		timeout := time.After(30 * time.Second)
		for len(want) > 0 {
			select {
			case s := <-seenCh:
				if s.key == key && s.version == version {
					delete(want, s.controller)
				}
			case <-timeout:
				t.Fatalf("not reconciled with version %s by %v", version, want)
			}
		}
	}
	waitFor("1")

	cm, err := cms.Get(ctx, "settings", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["version"] = "2"
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitFor("2")

	// The reconciler's write and Event reached the API server.
	require.Eventually(t, func() bool {
		cm, err := cms.Get(ctx, "settings", metav1.GetOptions{})
		return err == nil && cm.Annotations["version"] == "2"
	}, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		list, err := kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		var notes []string
		for _, e := range list.Items {
			if e.ReportingController == "annotate" && e.Regarding.Kind == "ConfigMap" && e.Regarding.Name == "settings" {
				notes = append(notes, e.Note)
			}
		}
		slices.Sort(notes)
		return fmt.Sprint(notes) == "[version 1 version 2]"
	}, 10*time.Second, 50*time.Millisecond, "events recorded by the annotate controller")

	// One informer serves both controllers' ConfigMaps: one watch, and at
	// most one LIST (none with client-go's streaming lists).
	after := scrapeRequests(t, cfg, "configmaps")
	assert.Equal(t, 1.0, after.OpenWatches-before.OpenWatches, "open WATCH requests for configmaps")
	assert.LessOrEqual(t, after.Lists-before.Lists, 1.0, "LIST requests for configmaps")
	assert.Equal(t, 0.0, after.Watches-before.Watches, "no watch was dropped and reopened")
	t.Logf("configmaps: %v LIST, %v open WATCH (before: %+v, after: %+v)",
		after.Lists-before.Lists, after.OpenWatches-before.OpenWatches, before, after)
}

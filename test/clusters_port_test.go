package test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcluster"
	mcreconcile "github.com/fxkube/fxkube/fxcluster"
	multicluster "github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// configMapReconciler is written for multicluster-runtime: only its
// imports name fxcluster, under multicluster-runtime's package names, and
// its manager is a *fxcluster.Fleet.
type configMapReconciler struct {
	mgr   *fxcluster.Fleet
	found chan<- string
}

func (r *configMapReconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	log := ctrllog.FromContext(ctx).WithValues("cluster", req.ClusterName)
	cl, err := r.mgr.GetCluster(ctx, req.ClusterName)
	if err != nil {
		return reconcile.Result{}, err
	}
	cm := &corev1.ConfigMap{}
	if err := cl.GetClient().Get(ctx, req.Request.NamespacedName, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	log.Info("ConfigMap found", "namespace", cm.Namespace, "name", cm.Name)
	r.found <- clusterOf(req.ClusterName) + ":" + cm.Namespace + "/" + cm.Name + "=" + cm.Data["level"]
	return ctrl.Result{}, nil
}

func clusterOf(name multicluster.ClusterName) string { return name.String() }

// A reconciler written for multicluster-runtime runs on fxcluster with
// its imports changed: it gets the member from the fleet and reads
// through the member's cached client.
func TestMulticlusterRuntimeReconcilerPorts(t *testing.T) {
	cfg := testenv.Config(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ns := testenv.Namespace(t, kube, "port")
	_, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{"port": "yes"}},
		Data:       map[string]string{"level": "1"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	found := make(chan string, 10)
	// The member is the test's own API server, under another name.
	provider, _ := staticProvider(map[fxcluster.ClusterName]*rest.Config{"self": cfg})
	newController := func(fleet *fxcluster.Fleet) (*fxcluster.Controller, error) {
		configMaps, err := fxcluster.For[*corev1.ConfigMap](fleet, fxstore.Spec{LabelSelector: "port=yes"})
		if err != nil {
			return nil, err
		}
		return fxcluster.NewController("ported", configMaps, &configMapReconciler{mgr: fleet, found: found})
	}
	app := testenv.App(t, cfg, lifecycle.Config{}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		fxcluster.Module,
		fxcluster.WithProvider(func() fxcluster.Provider { return provider }),
		fxcluster.Provide(newController),
	)
	app.RequireStart()
	defer app.RequireStop()
	select {
	case got := <-found:
		require.Equal(t, "self:"+ns+"/settings=1", got)
	case <-time.After(time.Minute):
		t.Fatal("the ported reconciler found nothing in a minute")
	}
}

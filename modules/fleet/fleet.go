package fleet

import (
	"context"
	"fmt"
	"maps"

	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxstore"
)

const (
	// SourceLabel makes a ConfigMap of the app's own cluster a source to
	// copy into every member when set to "true".
	SourceLabel = "fxkube.io/fleet"
	// CopyLabel is "true" on every copy.
	CopyLabel = "fxkube.io/fleet-copy"
	// Controller names the module's controller.
	Controller = "fleet"
)

// Module copies ConfigMaps into every member cluster; see the package
// documentation. It needs fxstore.Module and fxcluster.Module.
var Module = fx.Module("fleet", fxcluster.Provide(newController))

func newController(stores *fxstore.Registry, fleet *fxcluster.Fleet) (*fxcluster.Controller, error) {
	sources, err := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{LabelSelector: SourceLabel + "=true"})
	if err != nil {
		return nil, err
	}
	copies, err := fxcluster.For[*corev1.ConfigMap](fleet, fxstore.Spec{LabelSelector: CopyLabel + "=true"})
	if err != nil {
		return nil, err
	}
	r := &reconciler{sources: sources, copies: copies, fleet: fleet}
	return fxcluster.NewController(Controller, copies, r,
		fxcluster.WatchesOwnCluster(sources, func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		}),
		fxcluster.Writes(corev1.Resource("configmaps"), "create", "update", "delete"),
		fxcluster.Writes(corev1.Resource("namespaces"), "create"))
}

type reconciler struct {
	sources *fxstore.Store[*corev1.ConfigMap]
	copies  *fxcluster.Stores[*corev1.ConfigMap]
	fleet   *fxcluster.Fleet
}

// Reconcile makes the copy of req's ConfigMap in req's cluster equal to
// its source, or deletes it when the source is gone.
func (r *reconciler) Reconcile(ctx context.Context, req fxcluster.Request) (reconcile.Result, error) {
	cl, err := r.fleet.GetCluster(ctx, req.ClusterName)
	if err != nil {
		return reconcile.Result{}, err
	}
	copies, err := r.copies.In(req.ClusterName)
	if err != nil {
		return reconcile.Result{}, err
	}
	src, err := r.sources.Get(req.Namespace, req.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	srcFound := err == nil
	dst, err := copies.Get(req.Namespace, req.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	dstFound := err == nil
	c := cl.GetClient()
	switch {
	case !srcFound && !dstFound:
		return reconcile.Result{}, nil
	case !srcFound:
		return reconcile.Result{}, client.IgnoreNotFound(c.Delete(ctx, dst, client.Preconditions{UID: &dst.UID}))
	case !dstFound:
		cm := copyOf(src, nil)
		if err := r.create(ctx, c, cm); err != nil {
			return reconcile.Result{}, err
		}
		cl.GetEventRecorder(Controller).Eventf(cm, nil, corev1.EventTypeNormal, "Copied", "Copy",
			"copied from ConfigMap %s/%s of the app's cluster", src.Namespace, src.Name)
		return reconcile.Result{}, nil
	case sameContent(src, dst):
		return reconcile.Result{}, nil
	default:
		// dst is shared and read-only: update a copy of it.
		return reconcile.Result{}, c.Update(ctx, copyOf(src, dst))
	}
}

// create creates cm, and its namespace if the member has none.
func (r *reconciler) create(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
	err := c.Create(ctx, cm)
	if !apierrors.IsNotFound(err) {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cm.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s for the copy of ConfigMap %s: %w", cm.Namespace, cm.Name, err)
	}
	return c.Create(ctx, cm)
}

// copyOf returns the copy of src, as an update of dst when dst is not nil.
func copyOf(src, dst *corev1.ConfigMap) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: src.Name}}
	if dst != nil {
		cm.ObjectMeta = *dst.ObjectMeta.DeepCopy()
	}
	cm.Labels = copyLabels(src)
	cm.Data = maps.Clone(src.Data)
	cm.BinaryData = maps.Clone(src.BinaryData)
	return cm
}

func copyLabels(src *corev1.ConfigMap) map[string]string {
	labels := maps.Clone(src.Labels)
	delete(labels, SourceLabel)
	if labels == nil {
		labels = make(map[string]string, 1)
	}
	labels[CopyLabel] = "true"
	return labels
}

func sameContent(src, dst *corev1.ConfigMap) bool {
	return maps.Equal(copyLabels(src), dst.Labels) && maps.Equal(src.Data, dst.Data) &&
		maps.EqualFunc(src.BinaryData, dst.BinaryData, func(a, b []byte) bool { return string(a) == string(b) })
}

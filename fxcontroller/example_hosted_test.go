package fxcontroller_test

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
)

// OwnerReconciler is written as kubebuilder scaffolds a reconciler, against
// controller-runtime only: it labels every ConfigMap with its owning team,
// changing the object its cached client read.
type OwnerReconciler struct {
	client.Client
}

func (r *OwnerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cm.Labels["owner"] == "platform" {
		return ctrl.Result{}, nil
	}
	metav1.SetMetaDataLabel(&cm.ObjectMeta, "owner", "platform")
	return ctrl.Result{}, r.Update(ctx, &cm)
}

func (r *OwnerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("owner").Complete(r)
}

// An existing operator's setup runs unchanged as an fx module; here on
// in-memory stores, as a unit test would run it.
func ExampleSetupWithManager() {
	ownerModule := fx.Module("owner",
		fxcontroller.SetupWithManager(func(mgr ctrl.Manager) error {
			return (&OwnerReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
		}, fxcontroller.WithName("owner-operator"), fxcontroller.Writes(corev1.Resource("configmaps"), "update")),
	)

	var src *fxstoretest.Source
	app := fx.New(
		fxstoretest.Module(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}),
		fxcontrollertest.Module,
		ownerModule,
		fx.NopLogger,
		fx.Populate(&src),
	)
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = app.Stop(ctx) }()

	for range 500 {
		var cm corev1.ConfigMap
		if err := src.Client().Get(ctx, client.ObjectKey{Namespace: "default", Name: "settings"}, &cm); err == nil && cm.Labels["owner"] != "" {
			fmt.Println("settings owned by", cm.Labels["owner"])
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("timed out")
	// Output:
	// settings owned by platform
}

package fxcontroller_test

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
)

// versionModule is a controller module: it annotates each Secret with the
// version in the ConfigMap of the same name.
var versionModule = fx.Module("version", fxcontroller.Provide(newVersionController))

func newVersionController(stores *fxstore.Registry, c client.Client, recorders fxcontroller.RecorderProvider) (*fxcontroller.Controller, error) {
	secrets, err := fxstore.For[*corev1.Secret](stores, fxstore.Spec{})
	if err != nil {
		return nil, err
	}
	configMaps, err := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{})
	if err != nil {
		return nil, err
	}
	r := &versionReconciler{secrets: secrets, configMaps: configMaps, client: c, events: recorders.GetEventRecorder("version")}
	return fxcontroller.New("version", secrets, r,
		// A ConfigMap change enqueues the Secret of the same name.
		fxcontroller.Watches(configMaps, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, cm client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(cm)}}
			})),
		fxcontroller.Writes(corev1.Resource("secrets"), "update"),
	)
}

type versionReconciler struct {
	secrets    *fxstore.Store[*corev1.Secret]
	configMaps *fxstore.Store[*corev1.ConfigMap]
	client     client.Client
	events     events.EventRecorder
}

func (r *versionReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	secret, err := r.secrets.Get(req.Namespace, req.Name)
	if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var version string
	switch cm, err := r.configMaps.Get(req.Namespace, req.Name); {
	case err == nil:
		version = cm.Data["version"]
	case !apierrors.IsNotFound(err):
		return reconcile.Result{}, err
	}
	if secret.Annotations["version"] == version {
		return reconcile.Result{}, nil
	}
	secret = secret.DeepCopy() // store objects are shared: copy, then change
	metav1.SetMetaDataAnnotation(&secret.ObjectMeta, "version", version)
	if err := r.client.Update(ctx, secret); err != nil {
		return reconcile.Result{}, err
	}
	r.events.Eventf(secret, nil, corev1.EventTypeNormal, "Versioned", "Annotate", "version %s", version)
	return reconcile.Result{}, nil
}

// The app runs versionModule on in-memory stores and a fake client, as it
// would on a cluster: stores sync, then the controller starts.
func Example() {
	var (
		src      *fxstoretest.Source
		recorder *fxcontrollertest.Recorder
	)
	app := fx.New(
		fxstoretest.Module(
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Data: map[string]string{"version": "1"}},
		),
		fxcontrollertest.Module,
		versionModule,
		fx.Populate(&src, &recorder),
	)
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = app.Stop(ctx) }()

	key := client.ObjectKey{Namespace: "default", Name: "web"}
	// waitForVersion waits for the Secret to be annotated and the event that
	// follows.
	waitForVersion := func(want string, events int) {
		for range 500 {
			var secret corev1.Secret
			err := src.Client().Get(ctx, key, &secret)
			if err == nil && secret.Annotations["version"] == want && len(recorder.Events()) == events {
				fmt.Println("secret version", want)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Println("timed out waiting for version", want)
	}
	waitForVersion("1", 1)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Data: map[string]string{"version": "2"}}
	if err := src.Client().Update(ctx, cm); err != nil {
		fmt.Println(err)
		return
	}
	waitForVersion("2", 2)
	for _, e := range recorder.Events() {
		fmt.Println(e)
	}
	// Output:
	// secret version 1
	// secret version 2
	// Normal Versioned Secret default/web: version 1
	// Normal Versioned Secret default/web: version 2
}

package fxstore_test

import (
	"context"
	"fmt"

	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/lifecycle"
)

// Two modules ask for ConfigMaps labelled app=web, writing the selector
// differently; they share one store. The in-memory fxstoretest.Module stands
// in for an API server.
func ExampleFor() {
	var a, b *fxstore.Store[*corev1.ConfigMap]
	app := fx.New(
		fx.NopLogger,
		fxstoretest.Module(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: "web-config", Labels: map[string]string{"app": "web", "tier": "front"},
		}}),
		fx.Module("first", fx.Invoke(func(r *fxstore.Registry) (err error) {
			a, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "app=web,tier=front"})
			return err
		})),
		fx.Module("second", fx.Invoke(func(r *fxstore.Registry) (err error) {
			b, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "tier in (front), app==web"})
			return err
		})),
		fx.Invoke(func(r *fxstore.Registry) {
			stores := r.Stores()
			fmt.Printf("%d consumers, %d store\n", len(stores[0].Consumers), len(stores))
		}),
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0"}),
	)
	if err := app.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = app.Stop(context.Background()) }()

	cm, err := b.Get("default", "web-config")
	fmt.Println(a.Key(), cm.Name, err)
	// Output:
	// 2 consumers, 1 store
	// ConfigMap/v1 (all namespaces, labels "app=web,tier=front") web-config <nil>
}

// Before a store has synced, reads fail with ErrNotSynced instead of
// answering from a half-filled cache.
func ExampleStore_Get_notSynced() {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	cms, _ := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "default"})
	_, err := cms.Get("default", "x")
	fmt.Println(err)
	// Output:
	// store ConfigMap/v1 (namespace "default"): store not synced yet
}

// A store asked for while the app runs is held, and given back: once no
// request holds it, its informer stops and the registry forgets it.
func ExampleHold() {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	src := fxstoretest.NewSource(clientgoscheme.Scheme, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}})
	if err := r.Start(context.Background(), src); err != nil {
		fmt.Println(err)
		return
	}
	defer r.Stop()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held, err := fxstore.Hold[*corev1.ConfigMap](ctx, r, fxstore.Spec{Namespace: "default"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer held.Release() // or end ctx
	if err := r.WaitForStore(ctx, held.Key()); err != nil {
		fmt.Println(err)
		return
	}
	n, _ := held.Count()
	fmt.Println(n, "object,", len(r.Stores()), "store")

	held.Release()
	cancel() // releasing again, either way, does nothing more
	fmt.Println(len(r.Stores()), "stores")
	// Output:
	// 1 object, 1 store
	// 0 stores
}

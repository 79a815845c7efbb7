// Package docs_test holds the examples that docs/concepts.md quotes, so
// that they compile and run (see TestDocsGoBlocksAreCompiled).
package docs_test

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A narrow spec is served as a view of a broader one: no second informer.
func ExampleFor_view() {
	var web, front *fxstore.Store[*corev1.ConfigMap]
	var registry *fxstore.Registry
	app := fx.New(
		fx.NopLogger,
		fxstoretest.Module(),
		fx.Invoke(func(stores *fxstore.Registry) (err error) {
			registry = stores
			// In module a: every ConfigMap labelled app=web.
			web, err = fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{LabelSelector: "app=web"})
			if err != nil {
				return err
			}
			// In module b: a view of a's store.
			front, err = fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{Namespace: "a", LabelSelector: "app=web,tier=front"})
			return err
		}),
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0"}),
	)
	if err := app.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = app.Stop(context.Background()) }()
	for _, s := range registry.Stores() {
		if s.ViewOf != nil {
			fmt.Println(s.Key, "→ view of", s.ViewOf)
		}
	}
	fmt.Println(web.Key() != front.Key())
	// Output:
	// ConfigMap/v1 (namespace "a", labels "app=web,tier=front") → view of ConfigMap/v1 (all namespaces, labels "app=web")
	// true
}

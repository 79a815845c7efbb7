package lifecycle_test

import (
	"context"
	"fmt"

	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/lifecycle"
)

// ownerDefaulter labels ConfigMaps created without an owner.
type ownerDefaulter struct{}

func (ownerDefaulter) Default(_ context.Context, cm *corev1.ConfigMap) error {
	if cm.Labels["owner"] == "" {
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels["owner"] = "nobody"
	}
	return nil
}

// A module registers webhooks on the app's webhook server from an
// fx.Invoke: an admission webhook of controller-runtime's admission
// package, and the conversion webhook of the scheme's convertible kinds.
// The app serves them once it starts, before its stores list.
func ExampleWebhooks() {
	var hooks *lifecycle.Webhooks
	app := fx.New(fx.NopLogger,
		fxstore.Module,
		lifecycle.Module,
		fx.Invoke(func(w *lifecycle.Webhooks, s *k8sruntime.Scheme) {
			w.Register("/mutate-v1-configmap", admission.WithDefaulter(s, ownerDefaulter{}))
			w.RegisterConversion(s)
		}),
		fx.Populate(&hooks),
	)
	fmt.Println(app.Err(), hooks.Paths())
	// Output: <nil> [/mutate-v1-configmap /convert]
}

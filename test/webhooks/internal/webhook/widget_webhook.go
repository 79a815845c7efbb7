// Package webhook is the Widget operator's admission webhooks, as
// kubebuilder scaffolds them (internal/webhook/v2/widget_webhook.go).
package webhook

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2 "github.com/fxkube/fxkube/test/webhooks/api/v2"
)

// MaxReplicas is the most replicas the validating webhook admits.
const MaxReplicas = 10

// SetupWidgetWebhookWithManager registers the Widget webhooks with mgr: a
// defaulting and a validating webhook, and, as Widget's versions are
// convertible, the conversion webhook.
func SetupWidgetWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &v2.Widget{}).
		WithDefaulter(&WidgetDefaulter{}).
		WithValidator(&WidgetValidator{}).
		Complete()
}

// +kubebuilder:webhook:path=/mutate-webhooks-example-fxkube-io-v2-widget,mutating=true,failurePolicy=fail,sideEffects=None,groups=webhooks.example.fxkube.io,resources=widgets,verbs=create;update,versions=v2,name=mwidget-v2.kb.io,admissionReviewVersions=v1

// WidgetDefaulter gives a Widget without replicas one.
type WidgetDefaulter struct{}

// Default implements admission.Defaulter.
func (*WidgetDefaulter) Default(_ context.Context, w *v2.Widget) error {
	if w.Spec.Replicas == 0 {
		w.Spec.Replicas = 1
	}
	return nil
}

// +kubebuilder:webhook:path=/validate-webhooks-example-fxkube-io-v2-widget,mutating=false,failurePolicy=fail,sideEffects=None,groups=webhooks.example.fxkube.io,resources=widgets,verbs=create;update,versions=v2,name=vwidget-v2.kb.io,admissionReviewVersions=v1

// WidgetValidator rejects Widgets with more than MaxReplicas replicas.
type WidgetValidator struct{}

// ValidateCreate implements admission.Validator.
func (v *WidgetValidator) ValidateCreate(_ context.Context, w *v2.Widget) (admission.Warnings, error) {
	return nil, validate(w)
}

// ValidateUpdate implements admission.Validator.
func (v *WidgetValidator) ValidateUpdate(_ context.Context, _, w *v2.Widget) (admission.Warnings, error) {
	return nil, validate(w)
}

// ValidateDelete implements admission.Validator.
func (v *WidgetValidator) ValidateDelete(context.Context, *v2.Widget) (admission.Warnings, error) {
	return nil, nil
}

func validate(w *v2.Widget) error {
	if w.Spec.Replicas > MaxReplicas {
		return fmt.Errorf("spec.replicas: %d is more than %d", w.Spec.Replicas, MaxReplicas)
	}
	return nil
}

package webhooks_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/internal/testenv"
)

// podOperator is a hosted operator that defaults and validates Pods, as
// jobset and LeaderWorkerSet each do, at the paths controller-runtime's
// builder gives every Pod webhook: /mutate--v1-pod and /validate--v1-pod.
type podOperator struct{ name string }

// Default labels the Pod with the operator's name, and records what it
// saw of the other operators' labels.
func (o podOperator) Default(_ context.Context, pod *corev1.Pod) error {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels["saw-before-"+o.name] = fmt.Sprint(len(pod.Labels))
	pod.Labels[o.name] = "defaulted"
	return nil
}

// ValidateCreate denies a Pod labelled "deny-<name>".
func (o podOperator) ValidateCreate(_ context.Context, pod *corev1.Pod) (admission.Warnings, error) {
	if _, ok := pod.Labels["deny-"+o.name]; ok {
		return nil, fmt.Errorf("operator %s denies this Pod", o.name)
	}
	return nil, nil
}

func (o podOperator) ValidateUpdate(ctx context.Context, _, pod *corev1.Pod) (admission.Warnings, error) {
	return o.ValidateCreate(ctx, pod)
}

func (podOperator) ValidateDelete(context.Context, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
}

func (o podOperator) setup(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &corev1.Pod{}).WithDefaulter(o).WithValidator(o).Complete()
}

// podWebhooks are the webhook configurations both Pod operators' markers
// would generate, scoped to namespaces labelled for the test so that no
// other Pod goes through them.
func podWebhooks(label string) envtest.WebhookInstallOptions {
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	scope := &metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	return envtest.WebhookInstallOptions{
		LocalServingHost: "127.0.0.1",
		MaxTime:          timeout,
		MutatingWebhooks: []*admissionregistrationv1.MutatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: "cohosted-pods"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: "mpod.cohosted.fxkube.io", AdmissionReviewVersions: []string{"v1"},
				ClientConfig:      admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "webhook-service", Namespace: "system", Path: new("/mutate--v1-pod")}},
				Rules:             rules,
				FailurePolicy:     &fail,
				SideEffects:       &none,
				NamespaceSelector: scope,
			}},
		}},
		ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: "cohosted-pods"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name: "vpod.cohosted.fxkube.io", AdmissionReviewVersions: []string{"v1"},
				ClientConfig:      admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "webhook-service", Namespace: "system", Path: new("/validate--v1-pod")}},
				Rules:             rules,
				FailurePolicy:     &fail,
				SideEffects:       &none,
				NamespaceSelector: scope,
			}},
		}},
	}
}

// TestCohostedOperatorsWebhookOneKind hosts two operators that both
// default and validate Pods through ctrl.NewWebhookManagedBy, in either
// order: a Pod created through the API server carries both operators'
// defaults, the second's defaulter sees the first's, and either
// operator's validator denies a Pod it rejects.
func TestCohostedOperatorsWebhookOneKind(t *testing.T) {
	const label = "webhooks.fxkube.io/cohosted"
	cfg := testenv.Config(t)
	hooks := podWebhooks(label)
	require.NoError(t, hooks.PrepWithoutInstalling(), "make the serving certificates")
	t.Cleanup(func() { assert.NoError(t, hooks.Cleanup()) })
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	ctx := t.Context()
	const ns = "pods-cohosted"
	require.NoError(t, client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{label: "true"}}})))
	require.NoError(t, hooks.Install(cfg), "install the Pod webhook configurations")
	t.Cleanup(func() { uninstallWebhooks(t, c, hooks) })

	for _, order := range [][2]string{{"jobset", "lws"}, {"lws", "jobset"}} {
		first, second := order[0], order[1]
		t.Run(first+" then "+second, func(t *testing.T) {
			app := newApp(t, hooks, "0",
				fxcontroller.SetupWithManager(podOperator{first}.setup, fxcontroller.WithName(first)),
				fxcontroller.SetupWithManager(podOperator{second}.setup, fxcontroller.WithName(second)),
			)
			app.RequireStart()
			defer app.RequireStop()
			pod := func(name string, labels map[string]string) *corev1.Pod {
				return &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
				}
			}
			name := "defaulted-" + first
			p := pod(name, map[string]string{"app": "web"})
			require.NoError(t, c.Create(ctx, p))
			t.Cleanup(func() { assert.NoError(t, client.IgnoreNotFound(c.Delete(context.Background(), p))) })
			var got corev1.Pod
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(p), &got))
			assert.Equal(t, map[string]string{
				"app": "web",
				first: "defaulted", "saw-before-" + first: "1",
				// the second saw app, the first's label and its record
				second: "defaulted", "saw-before-" + second: "3",
			}, got.Labels, "both operators defaulted the Pod, the second after the first")

			for _, denier := range []string{first, second} {
				p := pod("denied-by-"+denier, map[string]string{"deny-" + denier: ""})
				err := c.Create(ctx, p)
				require.Error(t, err, "operator %s's validator denies", denier)
				assert.Contains(t, err.Error(), "operator "+denier+" denies this Pod")
				err = c.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
				assert.True(t, apierrors.IsNotFound(err), "nothing was stored: %v", errors.Unwrap(err))
			}
		})
	}
}

package fxcontrollertest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/fxstore"
)

// recordingTB is a testing.TB whose errors are recorded, not reported, so
// that a test can check what the kit fails a test with.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

func (r *recordingTB) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

// A reconciler that changes an object it read from a store, which every
// other reader shares, fails the test, naming the object and the change.
// Each case changes what a reconciler is most tempted to: a label, a
// container's env, a condition.
func TestReconcilerThatChangesWhatItReadFails(t *testing.T) {
	tests := []struct {
		name   string
		change func(d *appsv1.Deployment)
		want   []string // lines of the failure's diff: "-" as taken, "+" now
	}{
		{
			name:   "a label",
			change: func(d *appsv1.Deployment) { d.Labels["tier"] = "back" },
			want:   []string{`- "tier": "front"`, `+ "tier": "back"`},
		},
		{
			name: "a container's env",
			change: func(d *appsv1.Deployment) {
				c := &d.Spec.Template.Spec.Containers[0]
				c.Env = append(c.Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
			},
			want: []string{`+ "name": "DEBUG"`, `+ "value": "1"`},
		},
		{
			name:   "a condition",
			change: func(d *appsv1.Deployment) { d.Status.Conditions[0].Status = corev1.ConditionFalse },
			want:   []string{`- "status": "True"`, `+ "status": "False"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reconcileOnce(t, changerModule(tt.change))
			require.Len(t, got, 1, "the change fails the test once")
			assert.Contains(t, got[0], "store Deployment.apps/v1 (all namespaces): default/web was changed in place")
			assert.Contains(t, got[0], "DeepCopy one before changing it")
			var diff []string // the diff's changed lines, without indentation or commas
			for line := range strings.SplitSeq(got[0], "\n") {
				if strings.HasPrefix(line, "-") || strings.HasPrefix(line, "+") {
					diff = append(diff, line[:1]+" "+strings.TrimSuffix(strings.TrimSpace(line[1:]), ","))
				}
			}
			for _, w := range tt.want {
				assert.Contains(t, diff, w)
			}
		})
	}
}

// A reconciler that copies before it changes passes.
func TestReconcilerThatCopiesPasses(t *testing.T) {
	got := reconcileOnce(t, changerModule(func(d *appsv1.Deployment) {
		d = d.DeepCopy()
		d.Labels["tier"] = "back"
	}))
	assert.Empty(t, got)
}

// reconcileOnce reconciles the Deployment once with module's "changer", in
// a test of its own, and returns what that test failed with as it ended.
func reconcileOnce(t *testing.T, module fx.Option) []string {
	tb := &recordingTB{}
	t.Run("reconcile", func(t *testing.T) {
		tb.TB = t
		app := fxcontrollertest.New(tb, module, deployment())
		_, err := app.Reconcile(t.Context(), "changer", client.ObjectKey{Namespace: "default", Name: "web"})
		require.NoError(t, err)
	})
	return tb.recorded()
}

func changerModule(change func(*appsv1.Deployment)) fx.Option {
	return fx.Module("changer", fxcontroller.Provide(func(stores *fxstore.Registry) (*fxcontroller.Controller, error) {
		deployments, err := fxstore.For[*appsv1.Deployment](stores, fxstore.Spec{})
		if err != nil {
			return nil, err
		}
		return fxcontroller.New("changer", deployments, reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			d, err := deployments.Get(req.Namespace, req.Name)
			if err != nil {
				return reconcile.Result{}, err
			}
			change(d)
			return reconcile.Result{}, nil
		}))
	}))
}

func deployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Labels: map[string]string{"app": "web", "tier": "front"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "nginx", Env: []corev1.EnvVar{{Name: "PORT", Value: "8080"}}}},
		}}},
		Status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue},
		}},
	}
}

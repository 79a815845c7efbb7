package test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// podOperator is an operator with an unnamed Pod controller, as jobset
// and LeaderWorkerSet each have: controller-runtime's builder names it
// "pod". It records the Pods of namespace it reconciles.
type podOperator struct {
	namespace string
	mu        sync.Mutex
	seen      []string
}

func (o *podOperator) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if req.Namespace == o.namespace {
			ctrl.LoggerFrom(ctx).Info("reconciling")
			o.mu.Lock()
			o.seen = append(o.seen, req.Name)
			o.mu.Unlock()
		}
		return reconcile.Result{}, nil
	}))
}

func (o *podOperator) reconciled(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.seen {
		if s == name {
			return true
		}
	}
	return false
}

// Two unchanged operators whose controllers are both "pod" collide; hosted
// with WithControllerPrefix, both run, named apart in logs and metrics.
func TestHostedControllersOfOneName(t *testing.T) {
	cfg := testenv.Config(t)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "pods")

	t.Run("without a prefix", func(t *testing.T) {
		err := fx.New(fx.NopLogger, fx.Supply(cfg), fxstore.Module, lifecycle.Module, fxcontroller.Module,
			fxcontroller.SetupWithManager((&podOperator{}).setup, fxcontroller.WithName("jobset")),
			fxcontroller.SetupWithManager((&podOperator{}).setup, fxcontroller.WithName("lws")),
		).Err()
		require.Error(t, err)
		assert.Contains(t, err.Error(), `controller name "pod" is used by both hosted operator "jobset" and hosted operator "lws"`)
		assert.Contains(t, err.Error(), `host the operator with fxcontroller.WithControllerPrefix("lws") to name it "lws/pod"`)
	})

	jobset, lws := &podOperator{namespace: ns}, &podOperator{namespace: ns}
	core, logs := observer.New(zap.InfoLevel)
	fxApp := testenv.App(t, cfg, lifecycle.Config{}, zap.New(core),
		fxcontroller.Module,
		fxcontroller.SetupWithManager(jobset.setup, fxcontroller.WithName("jobset"), fxcontroller.WithControllerPrefix("jobset")),
		fxcontroller.SetupWithManager(lws.setup, fxcontroller.WithName("lws"), fxcontroller.WithControllerPrefix("lws")),
	)
	fxApp.RequireStart()
	defer fxApp.RequireStop()

	_, err = kube.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return jobset.reconciled("web") && lws.reconciled("web") }, 10*time.Second, 20*time.Millisecond,
		"both operators' pod controllers reconcile the Pod")

	// Logs and metrics name each controller "<prefix>/pod".
	controllers := map[string]bool{}
	for _, e := range logs.FilterMessage("reconciling").All() {
		controllers[e.ContextMap()["controller"].(string)] = true
	}
	assert.Equal(t, map[string]bool{"jobset/pod": true, "lws/pod": true}, controllers, "the controller value of the reconcilers' logs")
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	labels := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && strings.HasSuffix(l.GetValue(), "pod") {
					labels[l.GetValue()] = true
				}
			}
		}
	}
	assert.Equal(t, map[string]bool{"jobset/pod": true, "lws/pod": true}, labels, "the controller label of controller-runtime's reconcile metrics")
}

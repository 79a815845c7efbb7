package bench

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The hosting workload: k operators written as kubebuilder scaffolds them,
// each a controller of every ConfigMap of the workload that owns Secrets and
// finds a ConfigMap's Secret through a field index. The same code runs on
// ctrl.NewManager (one manager per operator, all in one process) and hosted
// on fxkube with fxcontroller.SetupWithManager (one app). Both caches hold
// the workload's objects only and strip managedFields (operatorCache).
//
// One operator compares the two hosts of the same reconciler; three show
// what sharing the app's stores saves when operators watch the same kinds.

// operatorCounts are the hosting workload's sizes, in table order.
var operatorCounts = []int{1, 3}

// hostingSystems run the hosting workload, in table order.
var hostingSystems = []string{fxkube, controllerRuntime}

// hosting is the workload of k operators.
func hosting(k int) workload {
	ops := make([]module, k)
	for i := range ops {
		ops[i] = module{name: fmt.Sprintf("op%d", i+1), primary: all}
	}
	return workload{
		controllers: ops,
		stores: func(n int) map[string]int {
			return map[string]int{"configmaps/" + all.name: n, "secrets": n}
		},
		systems: map[string]func(*rest.Config, *harness) (system, error){
			fxkube:            newHostedFxkube,
			controllerRuntime: newManagers,
		},
		resources: workloadResources,
	}
}

// hostingRounds is the burst of k operators: one operator's measures
// reconcile throughput; three would reconcile the same updates three times
// over, adding seconds per run for a figure no target asks for.
func hostingRounds(k int) int {
	if k == 1 {
		return burstRounds
	}
	return 0
}

// hostedName is what a run of the hosting workload on sys is recorded as.
func hostedName(k int, sys string) string { return fmt.Sprintf("operators=%d/%s", k, sys) }

// operatorCache is the cache options of every operator, on either host:
// the workload's objects, managedFields stripped. fxkube's hosts strip them
// by default and controller-runtime's keep them, so the transform is given
// to both.
func operatorCache() cache.Options {
	return cache.Options{
		DefaultLabelSelector: mustSelector(everything),
		DefaultTransform:     cache.TransformStripManagedFields(),
	}
}

// secretConfigMapKey indexes Secrets by the ConfigMap they belong to: the
// one of the same name.
const secretConfigMapKey = ".metadata.configMap"

func secretConfigMap(o client.Object) []string { return []string{o.GetName()} }

// ConfigMapReconciler is a kubebuilder-style reconciler: it reads the
// ConfigMap and lists its Secrets through the manager's cached client
// (deep copies, the default), and reports to the harness.
type ConfigMapReconciler struct {
	client.Client
	Name string
	h    *harness
	t    *tracker
}

func (r *ConfigMapReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.h.wait()
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var secrets corev1.SecretList
	if err := r.List(ctx, &secrets, client.InNamespace(req.Namespace), client.MatchingFields{secretConfigMapKey: req.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list secrets: %w", err)
	}
	r.t.report(&cm, len(secrets.Items) == 1 && secrets.Items[0].Name == cm.Name)
	return ctrl.Result{}, nil
}

// SetupWithManager declares the index and the controller, as kubebuilder's
// scaffold does. countUpdates tells the harness when the burst is queued.
func (r *ConfigMapReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Secret{}, secretConfigMapKey, secretConfigMap); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}, builder.WithPredicates(countUpdates[client.Object](r.t))).
		Owns(&corev1.Secret{}).
		Named(r.Name).
		Complete(r)
}

// setupOperator is the body of operator m's cmd/main.go between
// ctrl.NewManager and mgr.Start.
func setupOperator(m module, h *harness) func(ctrl.Manager) error {
	return func(mgr ctrl.Manager) error {
		return (&ConfigMapReconciler{Client: mgr.GetClient(), Name: m.name, h: h, t: h.trackers[m.name]}).SetupWithManager(mgr)
	}
}

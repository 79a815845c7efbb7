// Package summary is an operator that reads through caches of its own, as
// trust-manager's bundle controller does: it makes a cache with cache.New
// and a cluster with cluster.New, adds both to the manager with mgr.Add,
// and watches them through raw sources (source.Kind), one typed and one
// metadata-only. Setup is what a kubebuilder cmd/main.go does with it.
//
// A bundle is a ConfigMap labelled BundleLabel. The operator writes on it,
// as the annotation SummaryAnnotation, what carries the label OfLabel with
// the bundle's name in its namespace: the keys of such Secrets, and the
// number of such ConfigMaps and ServiceAccounts.
package summary

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

const (
	// BundleLabel marks the ConfigMaps the operator summarizes.
	BundleLabel = "summary.fxkube.dev/bundle"
	// OfLabel marks what a bundle's summary counts; its value is the bundle's name.
	OfLabel = "summary.fxkube.dev/of"
	// SummaryAnnotation is where the operator writes a bundle's summary.
	SummaryAnnotation = "summary.fxkube.dev/summary"
)

// Summary is what the operator writes on a bundle.
func Summary(secretKeys []string, configMaps, serviceAccounts int) string {
	return fmt.Sprintf("secret-keys=%s configmaps=%d serviceaccounts=%d", strings.Join(secretKeys, ","), configMaps, serviceAccounts)
}

// Setup adds the operator to mgr.
func Setup(mgr ctrl.Manager) error {
	labelled, err := labels.NewRequirement(OfLabel, selection.Exists, nil)
	if err != nil {
		return err
	}
	own := labels.NewSelector().Add(*labelled)
	// A cache of the operator's own, as trust-manager makes for its
	// targets: only what carries OfLabel, ConfigMaps as metadata only.
	sources, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:           mgr.GetHTTPClient(),
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultLabelSelector: own,
	})
	if err != nil {
		return fmt.Errorf("make the sources cache: %w", err)
	}
	if err := mgr.Add(sources); err != nil {
		return fmt.Errorf("add the sources cache: %w", err)
	}
	// A cluster, as a multi-cluster operator adds one for each cluster it
	// reads; this one is the manager's own API server.
	accounts, err := cluster.New(mgr.GetConfig(), func(o *cluster.Options) {
		o.Scheme = mgr.GetScheme()
		o.HTTPClient = mgr.GetHTTPClient()
		o.Cache.DefaultLabelSelector = own
	})
	if err != nil {
		return fmt.Errorf("make the accounts cluster: %w", err)
	}
	if err := mgr.Add(accounts); err != nil {
		return fmt.Errorf("add the accounts cluster: %w", err)
	}

	r := &reconciler{Client: mgr.GetClient(), sources: sources, accounts: accounts.GetCache()}
	toBundle := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetLabels()[OfLabel]}}}
	})
	configMaps := &metav1.PartialObjectMetadata{}
	configMaps.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return ctrl.NewControllerManagedBy(mgr).
		Named("summary").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[BundleLabel] == "true"
		}))).
		WatchesRawSource(source.Kind(sources, client.Object(&corev1.Secret{}), toBundle)).
		WatchesRawSource(source.Kind(sources, client.Object(configMaps), toBundle)).
		WatchesRawSource(source.Kind(accounts.GetCache(), client.Object(&corev1.ServiceAccount{}), toBundle)).
		Complete(r)
}

type reconciler struct {
	client.Client
	sources, accounts cache.Cache
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var bundle corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &bundle); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if bundle.Labels[BundleLabel] != "true" {
		return reconcile.Result{}, nil
	}
	of := client.MatchingLabels{OfLabel: bundle.Name}
	in := client.InNamespace(bundle.Namespace)

	var secrets corev1.SecretList
	if err := r.sources.List(ctx, &secrets, in, of); err != nil {
		return reconcile.Result{}, fmt.Errorf("list secrets: %w", err)
	}
	var keys []string
	for _, s := range secrets.Items {
		for k := range s.Data {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	configMaps := &metav1.PartialObjectMetadataList{}
	configMaps.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := r.sources.List(ctx, configMaps, in, of); err != nil {
		return reconcile.Result{}, fmt.Errorf("list configmaps: %w", err)
	}
	var accounts corev1.ServiceAccountList
	if err := r.accounts.List(ctx, &accounts, in, of); err != nil {
		return reconcile.Result{}, fmt.Errorf("list serviceaccounts: %w", err)
	}

	summary := Summary(slices.Compact(keys), len(configMaps.Items), len(accounts.Items))
	if bundle.Annotations[SummaryAnnotation] == summary {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFrom(bundle.DeepCopy())
	if bundle.Annotations == nil {
		bundle.Annotations = map[string]string{}
	}
	bundle.Annotations[SummaryAnnotation] = summary
	return reconcile.Result{}, r.Patch(ctx, &bundle, patch)
}

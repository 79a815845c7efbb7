package fxcluster

import (
	"context"

	"k8s.io/client-go/rest"
)

// Aware is what a Provider engages member clusters with.
type Aware interface {
	// Engage adds the member cluster name, reached through cfg, until ctx
	// ends: ending ctx is how a provider says the cluster left. Engaging
	// a name that is engaged already replaces it: new credentials
	// reconnect the cluster, with no restart of the app.
	//
	// Engage does not wait for the cluster. It returns once the cluster
	// is taken; the cluster joins in the background, and its failures are
	// the app's to report and retry. It returns an error for a name or a
	// config that can never work.
	Engage(ctx context.Context, name ClusterName, cfg *rest.Config) error
}

// Provider finds member clusters and engages them while the app runs.
// Start blocks until ctx ends, engaging clusters with clusters as it finds
// them, and ending each one's context as it goes. It is
// multicluster-runtime's ProviderRunnable: an adapter of one of its
// providers engages each cluster.Cluster's GetConfig().
type Provider interface {
	Start(ctx context.Context, clusters Aware) error
}

// ProviderFunc is a Provider of a function.
type ProviderFunc func(ctx context.Context, clusters Aware) error

// Start calls f.
func (f ProviderFunc) Start(ctx context.Context, clusters Aware) error { return f(ctx, clusters) }

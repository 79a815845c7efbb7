package fxcluster

import (
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ClusterName names a member cluster. A Provider chooses the names; each
// is unique among the clusters of one app. The empty name is the app's
// own cluster.
type ClusterName string

// String returns the name.
func (n ClusterName) String() string { return string(n) }

// Empty reports whether n names the app's own cluster.
func (n ClusterName) Empty() bool { return n == "" }

// Request is a reconcile.Request in a cluster: the object's name, and the
// cluster it lives in.
type Request struct {
	reconcile.Request

	// ClusterName is the cluster of the object.
	ClusterName ClusterName
}

// String returns the request as "cluster://<cluster>/<namespace>/<name>",
// or as reconcile.Request's String in the app's own cluster.
func (r Request) String() string {
	if r.ClusterName.Empty() {
		return r.Request.String()
	}
	return "cluster://" + r.ClusterName.String() + string(types.Separator) + r.Request.String()
}

// Cluster returns the cluster of the request.
func (r Request) Cluster() ClusterName { return r.ClusterName }

// WithCluster returns the request in cluster name.
func (r Request) WithCluster(name ClusterName) Request {
	r.ClusterName = name
	return r
}

// Reconciler reconciles requests in clusters.
type Reconciler = reconcile.TypedReconciler[Request]

// Func is a Reconciler of a function.
type Func = reconcile.TypedFunc[Request]

// Package fxcluster runs controllers across many clusters: member
// clusters that join and leave while the app runs.
//
// # Clusters
//
// The app's own cluster is where it runs; its stores are fxstore's. A
// member cluster is one a Provider engages: a kubeconfig Secret, a
// kubeconfig file, or anything else that yields a *rest.Config. Each
// member has its own connection, its own stores and its own start
// barrier:
//
//   - a member that joins starts its stores, and its controllers see it
//     only once those have synced, bounded by the sync timeout;
//   - a member that fails (unreachable, forbidden, a kind not served) is
//     named with its cause and retried with backoff; it gates only
//     itself;
//   - a member that leaves stops its controllers' work for it, then
//     frees its stores.
//
// # Porting from multicluster-runtime
//
// The names follow multicluster-runtime's: ClusterName, Request,
// Reconciler, Func, Provider and Aware. A reconciler written for it ports
// by changing its imports:
//
//	import (
//		multicluster "github.com/fxkube/fxkube/fxcluster"
//		mcreconcile "github.com/fxkube/fxkube/fxcluster"
//	)
package fxcluster

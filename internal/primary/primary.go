// Package primary is the contract between fxcontroller and the stores a
// controller reconciles the objects of, beyond what users see of them.
package primary

import "sigs.k8s.io/controller-runtime/pkg/reconcile"

// Gated is implemented by a primary store that holds only part of its
// spec's objects and changes which part while it runs, such as a sharded
// store. Its controller reconciles through the gate: requests for objects
// outside the part held now are dropped, and giving a part up waits for
// the reconciles of its objects in flight. Such a controller runs on every
// replica unless told otherwise: each holds its own part.
type Gated interface {
	// Gate returns r behind the store's gate. It is called once per
	// controller, once the controller's options are known to be valid.
	Gate(r reconcile.Reconciler) reconcile.Reconciler
}

// Gate implements Gated with Func. fxshard gives one to the sharded store
// it makes (storehooks.Buckets.SetGate), where fxcontroller finds it
// (storehooks.Hooks.Gate): the method is not part of the store's API.
type Gate struct {
	Func func(r reconcile.Reconciler) reconcile.Reconciler
}

// Gate implements Gated.
func (g *Gate) Gate(r reconcile.Reconciler) reconcile.Reconciler { return g.Func(r) }

// Package fxstore gives fx modules shared, typed Kubernetes object stores,
// one per watch spec.
//
// A module asks for a store with For, passing a Spec: the kind (from the Go
// type), namespace, label and field selectors, projection and transform.
// Equivalent specs (selectors written in another order, say) canonicalise to
// the same Key, and every request for one Key, from any module, gets a store
// backed by the same client-go shared informer: one LIST/WATCH and one copy
// of each object in the process.
//
//	func newController(stores *fxstore.Registry) (*controller, error) {
//		pods, err := fxstore.For[*corev1.Pod](stores, fxstore.Spec{LabelSelector: "app=web"})
//		...
//	}
//
// Asking for a store does no I/O. The app's lifecycle starts every store at
// once (Registry.Start), after checking that each kind is served and may be
// listed and watched, and waits for all of them to sync (Registry.WaitForSync)
// before any controller runs. Reads before a store has synced return
// ErrNotSynced rather than a partial answer.
//
// A store whose list/watch fails after start (access revoked, its kind
// gone, its conversion webhook down, the API server away) keeps serving
// what it held while it retries. Store.Err says since when and why; a
// handler given to Subscribe that implements HealthHandler hears the
// failure and the recovery.
//
// Reads return the cached objects without copying them. They are shared by
// every consumer: never modify one; DeepCopy it first.
//
// NewCache serves code written for controller-runtime: a cache.Cache whose
// informers are the registry's stores, with controller-runtime's read
// semantics (deep copies, namespaced field indexes, stores started on a
// kind's first read).
package fxstore

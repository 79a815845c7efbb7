// Package fxstore gives fx modules shared, typed Kubernetes object stores,
// one per watch spec.
//
// # Stores
//
// A module asks for a store with For and a Spec: the kind (from the Go
// type), namespace, label and field selectors, projection and transform.
//
//	func newController(stores *fxstore.Registry) (*controller, error) {
//		pods, err := fxstore.For[*corev1.Pod](stores, fxstore.Spec{LabelSelector: "app=web"})
//		...
//	}
//
// Equivalent specs, such as selectors in another order, canonicalise to
// one Key. Every request for a Key, from any module, gets a store backed
// by the same client-go shared informer. That is one LIST/WATCH and one
// copy of each object in the process. A narrower spec is served as a view
// of a broader store, with no watch or copy of its own.
//
// # Start
//
// Asking for a store does no I/O. The app's lifecycle then:
//
//  1. checks that each kind is served and may be listed and watched;
//  2. starts every store at once (Registry.Start);
//  3. waits for all of them to sync (Registry.WaitForSync) before any
//     controller runs.
//
// Reads before a store has synced return ErrNotSynced, not a partial
// answer.
//
// # Failures after start
//
// A store whose list/watch fails after start keeps serving what it held
// while it retries. Causes include revoked access, a deleted kind, a
// conversion webhook down and an API server away. Store.Err says since
// when and why. A handler given to Subscribe that implements HealthHandler
// hears the failure and the recovery.
//
// # Reads
//
// Reads return the stored objects without copying them. Every consumer
// shares them, and objects of a store share the parts they repeat. Never
// change one: DeepCopy it first. WithoutSharing turns sharing off for a
// store, and HeldAsBytes keeps a rarely read store's objects encoded.
//
// # Lifetimes
//
// A store asked for with For lives as long as the app. Hold asks for one
// its owner gives back; once no request holds a store, its informer stops.
// Views follow: once the last For or Hold of a broad store goes, each view
// of it moves to another store that covers it, or to an informer of its
// own. Its reads never fail meanwhile, and its handlers hear only what
// changed. Then the broad store stops.
//
// Package storecache serves code written for controller-runtime from the
// same stores: a cache.Cache with controller-runtime's read semantics.
package fxstore

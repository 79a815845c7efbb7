// Package informers holds the adapters fxkube's stores are made of, each a
// client-go cache.SharedIndexInformer as controller-runtime sources take:
//
//   - Union: one informer over members that come and go while it runs,
//     such as a store's namespaces or a sharded store's buckets;
//   - Filtered: the objects of a parent informer that a filter selects,
//     with the events a watch of their own would send (a view);
//   - the read-only indexers behind them, and AllDone, which waits for
//     several things at once.
//
// None of them runs, stops or configures an informer: their members and
// parents are run by whoever made them.
package informers

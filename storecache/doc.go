// Package storecache serves code written for controller-runtime from
// fxstore's stores. New returns a cache.Cache whose informers are a
// registry's stores:
//
//	c, err := storecache.New(registry, mapper, cache.Options{})
//
// Each kind resolves, with the cache's options, to the registry's store
// for that spec, shared with every module and every other cache asking
// for the same one. Reads have controller-runtime's semantics:
//
//   - Get and List fill the caller's objects with deep copies, unless
//     UnsafeDisableDeepCopy;
//   - field indexes (IndexField) are scoped by namespace;
//   - a kind first read after start gets a store started then, through
//     the registry's pre-flight checks.
//
// A hosted operator's manager (fxcontroller.SetupWithManager) reads
// through one, so its caches merge with every module's stores.
package storecache

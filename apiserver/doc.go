// Package apiserver connects fxstore's stores to a Kubernetes API server.
// Its Source is the fxstore.Source an app's registry starts its stores on:
//
//	src := apiserver.NewSource(conn.Client)
//	err := registry.Start(ctx, src)
//
// Before a store starts, Bind resolves its kind through discovery and asks
// the API server whether the app may list and watch it. A missing CRD, an
// RBAC rule or an API server away then fails at once, with an error that
// says which and how to fix it:
//
//   - ErrKindNotServed: the kind is not served (a CRD not installed);
//   - *AccessError: the app may not list or watch the kind;
//   - *UnreachableError: no request reaches the API server.
//
// One Source serves one cluster: one connection, one discovery, one cache
// of access reviews.
package apiserver

// Package fxkube runs many Kubernetes controllers in one Go process, as fx
// modules. This package holds only examples and tests; the framework is in
// the packages below it.
//
// A module asks for stores by watch spec. One spec gets one informer and
// one copy of its objects, shared by every module that asks. Controllers
// start only once every store has synced. The binary only lists modules:
//
//	func main() { os.Exit(app.Main("fxkube", rollout.Module, mirror.Module)) }
//
// # Packages
//
//   - fxstore: watch specs and their keys, the registry, Store[T] and the
//     Reader every store satisfies, views of broader stores.
//   - fxcontroller: controllers on shared stores (controller-runtime
//     underneath), and kubebuilder operators hosted with
//     SetupWithManager.
//   - fxshard: a controller's keys shared out among replicas through
//     Leases, and sharded stores that hold a replica's share.
//   - lifecycle: the start barrier, leader election, probes, metrics,
//     webhooks and the order of start and stop.
//   - connection: the app's one connection to its API server.
//   - app: the command line (run, describe, rbac, local) that main calls.
//
// # Testing
//
//   - fxstore/fxstoretest: stores on in-memory objects, no API server.
//   - fxcontroller/fxcontrollertest: a module's reconcilers, one request
//     at a time, against those stores and a fake client.
//
// The kits fail a test whose code changes an object it read from a store:
// objects are shared and read-only.
package fxkube

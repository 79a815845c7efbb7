// Package checksum stamps ConfigMaps with a checksum of their data, with a
// controller sharded across the app's replicas: an example of fxshard.
//
// A ConfigMap opts in with the label Label ("fxkube.io/checksum": "true");
// the controller keeps the annotation Annotation
// ("fxkube.io/checksum": "sha256:…") equal to the SHA-256 of its data and
// binaryData, and records which replica wrote it in ByAnnotation
// ("fxkube.io/checksum-by"). Pods that mount ConfigMaps often roll on such
// a checksum.
//
// The controller is sharded by uid (fxshard.For, then fxcontroller.New):
// every replica of the app runs it, each for the ConfigMaps of the buckets
// it holds, and holds only those in memory; its Leases are the app's
// --shard-namespace and name. Each write is logged ("checksum written",
// with when the reconcile began), so that who reconciled what, and when,
// can be read from the replicas' logs.
package checksum

// Package mirror keeps copies of a ConfigMap or Secret in other namespaces.
//
// A source opts in with the label SourceLabel ("fxkube.io/mirror": "true")
// and lists its target namespaces, comma-separated, in the annotation
// TargetsAnnotation ("fxkube.io/mirror-to": "ns-a,ns-b"):
//
//	apiVersion: v1
//	kind: ConfigMap
//	metadata:
//	  name: settings
//	  namespace: shared
//	  labels:
//	    fxkube.io/mirror: "true"
//	  annotations:
//	    fxkube.io/mirror-to: team-a,team-b
//	data:
//	  color: blue
//
// Each target namespace then holds a copy with the source's name and content
// (data and binaryData; data and type for Secrets), marked as a copy with the
// label CopyLabel ("fxkube.io/mirrored": "true") and the annotation
// CopyOfAnnotation ("fxkube.io/mirror-of": "shared/settings"). Changes to the
// source reach the copies. A copy is deleted when its namespace leaves the
// list, when the source loses the label, or when the source is deleted, also
// while the app was down: every copy leads back to its source through its
// annotation, so a copy whose source is gone is deleted when the app starts.
//
// Mirror never overwrites or deletes an object that is not a copy of the
// source: when a target namespace already holds an object of the source's
// name that is not its copy, it leaves the object alone and reports the
// conflict with a Warning Event on the source and a log line. It reports
// malformed entries of the annotation (empty, not a namespace name, the
// source's own namespace) the same way and ignores them. A target namespace
// that does not exist is reported too; the copy is made when the namespace
// appears.
//
// Module declares two controllers, ConfigMapsController and
// SecretsController, made from one implementation. They read ConfigMaps and
// Secrets through the app's shared stores of every namespace
// (fxstore.Spec{}), which other modules may share, and Namespaces through a
// metadata-only store.
package mirror

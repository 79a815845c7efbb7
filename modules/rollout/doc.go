// Package rollout restarts Deployments when the ConfigMaps and Secrets they
// use change, as Reloader does: a changed ConfigMap rolls out new pods that
// read it.
//
// A Deployment opts in with the annotation
//
//	fxkube.io/reload: "true"
//
// (any value strconv.ParseBool accepts). Its pod template then carries the
// annotation
//
//	fxkube.io/config-hash: <hex SHA-256>
//
// a hash of the data (data and binaryData) of every ConfigMap and Secret of
// its namespace that its pod template refers to: env valueFrom
// configMapKeyRef and secretKeyRef, envFrom, and configMap, secret and
// projected volumes, in containers and init containers. When that data
// changes, so does the hash, and changing the pod template makes the
// Deployment roll out. Setting the hash the first time, when a Deployment
// opts in, rolls it out once too.
//
// A referenced object that does not exist (optional or not) is hashed by its
// name alone, so creating it, or deleting a referenced object, changes the
// hash. Changes to objects no opted-in Deployment refers to do nothing.
//
// Deployments without the annotation, or with a false value, are never
// touched; one that opts out keeps its last hash. An annotation value that is
// not a boolean is reported, with a Warning Event (reason InvalidAnnotation)
// on the Deployment and a log line, and the Deployment is left alone.
//
// The module watches Deployments, ConfigMaps and Secrets in all namespaces
// through the app's shared stores (the ConfigMap and Secret stores have the
// default spec, so other modules asking for them share them), and patches
// Deployments.
package rollout

// Package fleet copies ConfigMaps from the app's own cluster into every
// member cluster: the example module of a controller across clusters.
//
// A ConfigMap labelled fxkube.io/fleet=true in the app's own cluster is
// copied into each member, in the namespace of the same name, which is
// created if missing. Each copy is labelled fxkube.io/fleet-copy=true.
// A copy is kept equal to its source: changed back when someone edits it,
// deleted when its source goes, and made in each member that joins. A
// copy made is told by a Copied Event in its member.
package fleet

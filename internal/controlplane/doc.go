// Package controlplane locates and starts the kube-apiserver, etcd and
// kubectl binaries that test/controlplane/build.sh builds, so that tests and
// the app's local command run against the same real control plane. A running
// control plane can also be put through faults, for reliability tests:
// kube-apiserver restarted, a second kube-apiserver on the same etcd, etcd
// compacted (see faults.go).
//
// The binaries live outside the repository in a cache directory keyed by
// their versions (see [Dir]); `make controlplane` builds them there once.
package controlplane

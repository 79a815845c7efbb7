// Package controlplane locates the kube-apiserver, etcd and kubectl binaries
// that test/controlplane/build.sh builds, so that tests and `fxkube local`
// run against the same real control plane.
//
// The binaries live outside the repository in a cache directory keyed by
// their versions (see [Dir]); `make controlplane` builds them there once.
package controlplane

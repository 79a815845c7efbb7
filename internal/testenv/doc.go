// Package testenv runs one real kube-apiserver and etcd for the tests of a
// package, so that tests that talk to an API server talk to a real one.
//
// Start the control plane from TestMain; it runs for the whole test binary
// and is stopped before goleak looks for leaked goroutines, which therefore
// needs no options: by then envtest's processes, and the goroutines that
// waited on them, have ended.
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(testenv.WithControlPlane(m))
//	}
//
// Options of [controlplane.Start] configure it for every test of the binary,
// such as an alpha feature of kube-apiserver turned on:
//
//	testenv.WithControlPlane(m, controlplane.WithFeatureGates(map[string]bool{"ShardedListAndWatch": true}))
//
// Tests then reach it through [Config] (an admin client config; the user is in
// system:masters, so it may also read the API server's /metrics), [User] (a
// client config for a user with only the rights a test grants),
// [KubeconfigPath] and [KubectlPath]; [ControlPlane] gives tests that inject
// faults the control plane itself.
//
// The binaries come from the directory in KUBEBUILDER_ASSETS when that is
// set, and otherwise from [controlplane.Dir], where `make controlplane` builds
// them (see [controlplane.AssetsDir]). When they are missing the test binary
// fails (it does not skip) with a message that says how to build them.
// Everything listens on 127.0.0.1 only.
//
// controller-runtime's envtest starts and stops the processes, so its
// variables apply: KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true shows the
// processes' output, and KUBEBUILDER_CONTROLPLANE_START_TIMEOUT and
// KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT bound each process's start and stop
// (here both default to one minute, as a cold start under -race on a small
// machine can exceed envtest's 20 seconds).
//
// # Shared helpers
//
// What the tests of many packages build alike is written here once:
//
//   - [ConfigMap], a ConfigMap with the labels, annotations and data given.
//   - [Namespace], a namespace of its own for a test.
//   - [App], an app of fxstore.Module and lifecycle on the control plane.
//   - [Kubeconfig], a kubeconfig with its credentials embedded, as a
//     member cluster's Secret holds one.
package testenv

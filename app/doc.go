// Package app is the entry point of an fxkube binary. main lists its
// modules and calls Main:
//
//	func main() { os.Exit(app.Main("fxkube", rollout.Module, mirror.Module)) }
//
// Main gives the modules:
//
//   - a command line: run, describe, rbac, and local in -tags local builds;
//   - a zap logger, and one connection to the API server;
//   - the stores, the controllers, and the lifecycle that starts and
//     stops them;
//   - a fleet of member clusters (fxcluster.Module), of none until a
//     module adds a provider with fxcluster.WithProvider.
package app

// Package app is the entry point of an fxkube binary: main lists its modules
// and calls Main, which gives them a command line (run, describe, rbac,
// local), a logger, a connection to the API server, stores, controllers and
// the lifecycle that starts and stops them.
//
//	func main() { os.Exit(app.Main("fxkube", rollout.Module, mirror.Module)) }
package app

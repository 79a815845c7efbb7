// Package connection is an app's one connection to its API server: one
// rest.Config, one HTTP client, one lazily discovering REST mapper and one
// direct client, shared by every store, client, event recorder, leader
// election and hosted controller-runtime manager of the app, as
// controller-runtime's cluster.New shares them within one manager.
//
// Building a Connection does no I/O: the REST mapper discovers kinds the
// first time it is asked about them.
package connection

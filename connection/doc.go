// Package connection is an app's one connection to its API server. A
// Connection holds:
//
//   - one rest.Config and one HTTP client;
//   - one REST mapper, which discovers kinds lazily;
//   - one direct client.
//
// Every store, client, event recorder, leader election and hosted manager
// of the app shares them. controller-runtime's cluster.New shares them the
// same way within one manager.
//
// Building a Connection does no I/O. The REST mapper discovers a kind the
// first time it is asked about it.
package connection

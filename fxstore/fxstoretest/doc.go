// Package fxstoretest runs fxstore stores on in-memory objects, so module
// authors can unit-test code that reads stores without an API server.
//
// A Source holds objects in a controller-runtime fake client. Stores bound
// to it list and watch that client. What a test writes through
// Source.Client reaches every store whose spec selects it, as it would from
// an API server.
//
// Module wires a Source into an fx app in place of the API server. The
// app's lifecycle starts the stores on it: fxcontrollertest.Module, or
// lifecycle.Options.
package fxstoretest

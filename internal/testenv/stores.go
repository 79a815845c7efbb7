package testenv

import (
	"testing"

	"github.com/fxkube/fxkube/fxstore"
)

// StoreInfo returns what r reports of the store with key, and fails the
// test if r has no such store.
func StoreInfo(t testing.TB, r *fxstore.Registry, key fxstore.Key) fxstore.StoreInfo {
	t.Helper()
	for _, info := range r.Stores() {
		if info.Key == key {
			return info
		}
	}
	t.Fatalf("no store %s", key)
	return fxstore.StoreInfo{}
}

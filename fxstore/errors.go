package fxstore

import (
	"errors"
	"fmt"
)

// ErrNotSynced is returned by reads from a store that has not finished its
// initial sync. Wait with Store.WaitForSync, or rely on the app's lifecycle,
// which starts controllers only after every store has synced.
var ErrNotSynced = errors.New("store not synced yet")

// StoreError reports a problem with one store.
type StoreError struct {
	Key Key
	Err error
}

func (e *StoreError) Error() string { return fmt.Sprintf("store %s: %v", e.Key, e.Err) }

func (e *StoreError) Unwrap() error { return e.Err }

package fxstore

import (
	"errors"
	"fmt"
	"time"
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

// FailingError reports a store whose list and watch have failed since
// Since: it holds the objects it had then, and they grow stale while it
// retries. Err is the last list/watch error.
type FailingError struct {
	Since time.Time
	Err   error
}

func (e *FailingError) Error() string {
	return fmt.Sprintf("failing since %s (%s ago): %v", e.Since.Format(time.RFC3339), time.Since(e.Since).Round(time.Second), e.Err)
}

func (e *FailingError) Unwrap() error { return e.Err }

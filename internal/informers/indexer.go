package informers

import (
	"errors"

	"k8s.io/client-go/tools/cache"
)

// ErrReadOnly is what writing to a Union's or a Filtered's indexer returns:
// their objects are their members' or their parent's.
var ErrReadOnly = errors.New("this store's objects are those of the informers it reads; they cannot be written")

// readOnly gives an indexer the writes of cache.Store, each refused.
type readOnly struct{}

// Add implements cache.Store; it is refused.
func (readOnly) Add(any) error { return ErrReadOnly }

// Update implements cache.Store; it is refused.
func (readOnly) Update(any) error { return ErrReadOnly }

// Delete implements cache.Store; it is refused.
func (readOnly) Delete(any) error { return ErrReadOnly }

// Replace implements cache.Store; it is refused.
func (readOnly) Replace([]any, string) error { return ErrReadOnly }

// Resync implements cache.Store: there is nothing to resync.
func (readOnly) Resync() error { return nil }

// Bookmark implements cache.Store: bookmarks are the sources'.
func (readOnly) Bookmark(string) {}

// AddIndexers implements cache.Indexer; add indexes to the informer.
func (readOnly) AddIndexers(cache.Indexers) error { return ErrReadOnly }

// keysOf returns the keys of items.
func keysOf(items []any) []string {
	keys := make([]string, 0, len(items))
	for _, item := range items {
		if k, err := cache.MetaNamespaceKeyFunc(item); err == nil {
			keys = append(keys, k)
		}
	}
	return keys
}

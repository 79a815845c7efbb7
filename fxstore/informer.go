package fxstore

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
)

// storeInformer is the informer a Store gives out (Store.Informer): its
// entry's own informer or, once the registry has planned the store as a
// view, the view's. Callers may keep it from before start, as
// controller-runtime sources do. A handler added before the registry has
// started keeps the store on an informer of its own. Handlers are the
// store's (entry.handlers): they follow it when its backing changes.
type storeInformer struct{ e *entry }

var _ cache.SharedIndexInformer = (*storeInformer)(nil)

func (i *storeInformer) target() cache.SharedIndexInformer { return i.e.backing().informer() }

// pinIfUnplanned keeps the store on its own informer if the registry has
// not planned it yet: handlers cannot be moved to a view's.
func (i *storeInformer) pinIfUnplanned() {
	r := i.e.registry
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		i.e.pinned = true
	}
}

// AddEventHandler implements cache.SharedInformer.
func (i *storeInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, cache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod implements cache.SharedInformer.
func (i *storeInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, cache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions implements cache.SharedInformer.
func (i *storeInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	i.pinIfUnplanned()
	reg, err := i.e.handlers.Add(h, o)
	if err != nil {
		return nil, err
	}
	return reg, nil
}

// RemoveEventHandler implements cache.SharedInformer.
func (i *storeInformer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	return i.e.handlers.Remove(reg)
}

// GetStore implements cache.SharedInformer.
func (i *storeInformer) GetStore() cache.Store { return i.target().GetStore() }

// GetController implements cache.SharedInformer.
func (i *storeInformer) GetController() cache.Controller { return i.target().GetController() }

// Run implements cache.SharedInformer. The registry runs its stores; run
// never by callers.
func (i *storeInformer) Run(stop <-chan struct{}) { i.target().Run(stop) }

// RunWithContext implements cache.SharedInformer. The registry runs its
// stores; run never by callers.
func (i *storeInformer) RunWithContext(ctx context.Context) { i.target().RunWithContext(ctx) }

// HasSynced implements cache.SharedInformer.
func (i *storeInformer) HasSynced() bool { return i.target().HasSynced() }

// HasSyncedChecker implements cache.SharedInformer.
func (i *storeInformer) HasSyncedChecker() cache.DoneChecker { return i.target().HasSyncedChecker() }

// LastSyncResourceVersion implements cache.SharedInformer.
func (i *storeInformer) LastSyncResourceVersion() string { return i.target().LastSyncResourceVersion() }

// SetWatchErrorHandler implements cache.SharedInformer.
func (i *storeInformer) SetWatchErrorHandler(h cache.WatchErrorHandler) error {
	return i.target().SetWatchErrorHandler(h)
}

// SetWatchErrorHandlerWithContext implements cache.SharedInformer.
func (i *storeInformer) SetWatchErrorHandlerWithContext(h cache.WatchErrorHandlerWithContext) error {
	return i.target().SetWatchErrorHandlerWithContext(h)
}

// SetTransform implements cache.SharedInformer.
func (i *storeInformer) SetTransform(t cache.TransformFunc) error { return i.target().SetTransform(t) }

// IsStopped implements cache.SharedInformer.
func (i *storeInformer) IsStopped() bool { return i.target().IsStopped() }

// AddIndexers implements cache.SharedIndexInformer. The indexes are the
// store's, as a request's would be: a view's go onto its parent's
// informer under names of the view's.
func (i *storeInformer) AddIndexers(indexers cache.Indexers) error {
	return i.e.registry.addIndexers(i.e, indexers)
}

// GetIndexer implements cache.SharedIndexInformer.
func (i *storeInformer) GetIndexer() cache.Indexer { return i.target().GetIndexer() }

package fxstore

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reader reads the objects of a store. Every store satisfies it, whatever
// backs it: an informer of its own, a broader store (a view), or the
// buckets a replica holds (fxshard.Store). A reconciler that takes a
// Reader moves from an unsharded store to a sharded one without a change.
//
// Objects read are shared and read-only: DeepCopy before changing one.
type Reader[T client.Object] interface {
	// Get returns the object with the given namespace and name; a missing
	// one is a NotFound error (apierrors.IsNotFound).
	Get(namespace, name string) (T, error)
	// List returns the objects matching client.InNamespace and label
	// selectors.
	List(opts ...client.ListOption) ([]T, error)
	// ByIndex returns the objects under value in an index declared with
	// WithIndex or WithFieldIndex.
	ByIndex(index, value string) ([]T, error)
	// Count returns how many objects the store holds.
	Count() (int, error)
}

var _ Reader[client.Object] = (*Store[client.Object])(nil)

// Store is a read-only, shared view of the objects matching one Key, kept up
// to date by one informer. Every consumer of the same key shares it. A
// store whose objects are a subset of a broader store's is served from
// that store's informer, filtered (a view; see Registry.Start), and behaves
// the same. A sharded store (fxshard.For) is served from the stores of the
// buckets it holds, and has synced while each of them has.
//
// Reads return the cached objects themselves, not copies: treat them as
// read-only and DeepCopy before changing one. Before the store has synced,
// reads return an error wrapping ErrNotSynced, never a partial answer.
type Store[T client.Object] struct {
	e *entry
}

// storeEntry is implemented by every Store, and by a value that embeds
// one, such as an fxshard.Store: how the hooks reach the store's entry.
type storeEntry interface{ storeEntry() *entry }

func (s *Store[T]) storeEntry() *entry {
	if s == nil {
		return nil
	}
	return s.e
}

// Key returns the canonical watch spec of the store.
func (s *Store[T]) Key() Key { return s.e.key }

// String describes the store.
func (s *Store[T]) String() string { return s.e.key.String() }

// HasSynced reports whether the store has finished its initial sync.
func (s *Store[T]) HasSynced() bool { return s.e.synced.Load() }

// WaitForSync blocks until the store has synced or ctx ends.
func (s *Store[T]) WaitForSync(ctx context.Context) error {
	select {
	case <-s.e.syncedDone():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for store %s: %w", s.e.key, context.Cause(ctx))
	}
}

// Err returns nil while the store's list and watch work. Once they fail
// (access revoked, the kind gone, the API server away), it returns a
// *StoreError wrapping a *FailingError: the store keeps serving the
// objects it held, which grow stale while it retries. Before its first
// sync, Err says why a store cannot sync, if its list fails.
//
// An error that does not say why, such as the timeouts a watch gets when a
// conversion webhook fails, is diagnosed first: Err turns non-nil up to 5
// seconds later, with the error of a plain list of one object, which names
// the webhook.
func (s *Store[T]) Err() error { return s.e.failure() }

// Informer returns the shared informer behind the store, to feed
// controller-runtime sources. Adding handlers is fine; never run or stop it.
func (s *Store[T]) Informer() cache.SharedIndexInformer { return s.e.proxy }

// keyBuffers holds buffers for building "namespace/name" keys, so Get does not
// allocate.
var keyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 128); return &b }}

// Get returns the object with the given namespace and name (namespace is
// empty for cluster-scoped kinds). A missing object is a Kubernetes NotFound
// error, so apierrors.IsNotFound works.
func (s *Store[T]) Get(namespace, name string) (T, error) {
	var zero T
	if !s.e.synced.Load() {
		return s.getUnsynced(namespace, name)
	}
	b := s.e.backing()
	var (
		item   any
		exists bool
	)
	if namespace == "" {
		item, exists = b.get(name)
	} else {
		buf := keyBuffers.Get().(*[]byte)
		bs := append(append(append((*buf)[:0], namespace...), '/'), name...)
		// The indexer only looks the key up and does not keep it, so it
		// may point into the pooled buffer.
		item, exists = b.get(unsafe.String(unsafe.SliceData(bs), len(bs)))
		*buf = bs
		keyBuffers.Put(buf)
	}
	if !exists {
		return zero, apierrors.NewNotFound(b.resource(), name)
	}
	return item.(T), nil
}

// getUnsynced is Get while the store has not synced: an object found in a
// part that has (a bucket of a sharded store), else ErrNotSynced.
func (s *Store[T]) getUnsynced(namespace, name string) (T, error) {
	if item, ok := s.e.backing().getSynced(cache.NewObjectName(namespace, name).String()); ok {
		return item.(T), nil
	}
	var zero T
	return zero, s.e.notSynced
}

// List returns the objects matching opts. client.InNamespace and
// client.MatchingLabels (or MatchingLabelsSelector) are supported; use
// ByIndex to look objects up by other fields.
func (s *Store[T]) List(opts ...client.ListOption) ([]T, error) {
	if !s.e.synced.Load() {
		return nil, s.e.notSynced
	}
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	if lo.FieldSelector != nil && !lo.FieldSelector.Empty() {
		return nil, fmt.Errorf("store %s: List does not take field selectors; declare an index with WithIndex and use ByIndex", s.e.key)
	}
	items, err := s.e.backing().list(lo.Namespace, lo.LabelSelector)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", s.e.key, err)
	}
	return filter[T](items, lo.LabelSelector), nil
}

// ByIndex returns the objects found under value in the named index, which a
// request for this store declared with WithIndex.
func (s *Store[T]) ByIndex(index, value string) ([]T, error) {
	if !s.e.synced.Load() {
		return nil, s.e.notSynced
	}
	items, err := s.e.backing().byIndex(index, value)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w; declare it with fxstore.WithIndex", s.e.key, err)
	}
	return filter[T](items, nil), nil
}

// ByField returns the objects whose field, indexed by a request for this
// store with WithFieldIndex, has value: in namespace, or in every namespace
// when namespace is empty.
func (s *Store[T]) ByField(namespace, field, value string) ([]T, error) {
	return s.ByIndex(FieldIndexName(field), namespacedValue(namespace, value))
}

// Count returns how many objects the store holds.
func (s *Store[T]) Count() (int, error) {
	if !s.e.synced.Load() {
		return 0, s.e.notSynced
	}
	return s.e.backing().count(), nil
}

// filter returns the items that sel matches, all if it is nil, as Ts.
func filter[T client.Object](items []any, sel labels.Selector) []T {
	out := make([]T, 0, len(items))
	for _, item := range items {
		obj := item.(T)
		if sel == nil || sel.Matches(labels.Set(obj.GetLabels())) {
			out = append(out, obj)
		}
	}
	return out
}

// Subscribe adds h to the store's event handlers. A subscriber added after
// the store has started first receives an Add for every object already held
// (client-go's handler semantics); Subscription.HasSynced tells when it has
// caught up. Handlers run one event at a time, in order, and must not block
// for long; objects passed to them are shared and read-only.
//
// A handler that also implements HealthHandler hears when the store begins
// to fail and when it works again.
func (s *Store[T]) Subscribe(h cache.ResourceEventHandler) (*Subscription, error) {
	reg, err := s.e.proxy.AddEventHandler(h)
	if err != nil {
		return nil, fmt.Errorf("subscribe to store %s: %w", s.e.key, err)
	}
	sub := &Subscription{informer: s.e.proxy, reg: reg, e: s.e}
	if hh, ok := h.(HealthHandler); ok {
		s.e.mu.Lock()
		if s.e.healthHandlers == nil {
			s.e.healthHandlers = make(map[*Subscription]HealthHandler)
		}
		s.e.healthHandlers[sub] = hh
		s.e.mu.Unlock()
	}
	return sub, nil
}

// HealthHandler is implemented by a handler given to Subscribe that wants
// to hear of the store's health: OnHealth(err) once the store begins to
// fail (err is what Store.Err returns), and OnHealth(nil) once it works
// again. Each transition is told once, in the goroutine that saw it: do
// not block.
type HealthHandler interface {
	OnHealth(err error)
}

// Subscription is a handler added to a store by Subscribe.
type Subscription struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
	e        *entry
	once     sync.Once
	err      error
}

// HasSynced reports whether the handler has received every object the store
// held when it subscribed (and the store has synced).
func (s *Subscription) HasSynced() bool { return s.reg.HasSynced() }

// WaitForSync blocks until HasSynced or ctx ends.
func (s *Subscription) WaitForSync(ctx context.Context) error {
	select {
	case <-s.reg.HasSyncedChecker().Done():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Unsubscribe removes the handler; it receives no further events. Calling it
// again does nothing.
func (s *Subscription) Unsubscribe() error {
	s.once.Do(func() {
		s.e.mu.Lock()
		delete(s.e.healthHandlers, s)
		s.e.mu.Unlock()
		s.err = s.informer.RemoveEventHandler(s.reg)
	})
	return s.err
}

// HandlerFuncs adapts typed functions to a cache.ResourceEventHandler for
// Subscribe. Nil functions are skipped. Deletes whose final state was missed
// (cache.DeletedFinalStateUnknown) pass the last known object.
type HandlerFuncs[T client.Object] struct {
	AddFunc    func(obj T, isInInitialList bool)
	UpdateFunc func(oldObj, newObj T)
	DeleteFunc func(obj T)
	// HealthFunc hears the store's health (see HealthHandler).
	HealthFunc func(err error)
}

var (
	_ cache.ResourceEventHandler = HandlerFuncs[client.Object]{}
	_ HealthHandler              = HandlerFuncs[client.Object]{}
)

// OnHealth implements HealthHandler.
func (h HandlerFuncs[T]) OnHealth(err error) {
	if h.HealthFunc != nil {
		h.HealthFunc(err)
	}
}

// OnAdd implements cache.ResourceEventHandler.
func (h HandlerFuncs[T]) OnAdd(obj any, isInInitialList bool) {
	if t, ok := obj.(T); ok && h.AddFunc != nil {
		h.AddFunc(t, isInInitialList)
	}
}

// OnUpdate implements cache.ResourceEventHandler.
func (h HandlerFuncs[T]) OnUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(T)
	n, ok2 := newObj.(T)
	if ok1 && ok2 && h.UpdateFunc != nil {
		h.UpdateFunc(o, n)
	}
}

// OnDelete implements cache.ResourceEventHandler.
func (h HandlerFuncs[T]) OnDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if t, ok := obj.(T); ok && h.DeleteFunc != nil {
		h.DeleteFunc(t)
	}
}

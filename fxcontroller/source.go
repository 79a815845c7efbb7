package fxcontroller

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/fxkube/fxkube/fxstore"
)

// storeSource feeds a controller from a store: controller-runtime's
// source.Informer over the store's shared informer, which also waits for the
// store to sync and removes its event handler when the controller stops.
type storeSource struct {
	key        fxstore.Key
	informer   cache.SharedIndexInformer
	waitStore  func(context.Context) error
	handler    handler.EventHandler
	predicates []predicate.Predicate

	mu  sync.Mutex
	reg cache.ResourceEventHandlerRegistration // set by Start
}

var _ source.SyncingSource = (*storeSource)(nil)

func newStoreSource(s Primary, h handler.EventHandler, predicates []predicate.Predicate) *storeSource {
	return &storeSource{key: s.Key(), informer: s.Informer(), waitStore: s.WaitForSync, handler: h, predicates: predicates}
}

// Start implements source.Source.
func (s *storeSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	informer := &registrationRecorder{SharedIndexInformer: s.informer}
	src := &source.Informer{Informer: informer, Handler: s.handler, Predicates: s.predicates}
	if err := src.Start(ctx, q); err != nil {
		return fmt.Errorf("subscribe to store %s: %w", s.key, err)
	}
	s.mu.Lock()
	s.reg = informer.reg
	s.mu.Unlock()
	return nil
}

// WaitForSync implements source.SyncingSource: it returns once the store has
// synced and the controller's handler has seen every object it held.
func (s *storeSource) WaitForSync(ctx context.Context) error {
	if err := s.waitStore(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	reg := s.reg
	s.mu.Unlock()
	if reg == nil {
		return fmt.Errorf("store %s: source not started", s.key)
	}
	select {
	case <-reg.HasSyncedChecker().Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("store %s: %w", s.key, context.Cause(ctx))
	}
}

// stop removes the controller's handler from the store's informer.
func (s *storeSource) stop() error {
	s.mu.Lock()
	reg := s.reg
	s.reg = nil
	s.mu.Unlock()
	if reg == nil {
		return nil
	}
	return s.informer.RemoveEventHandler(reg)
}

func (s *storeSource) String() string { return "store " + s.key.String() }

// registrationRecorder keeps the registration of the handler that
// source.Informer adds, which source.Informer drops, so the handler can be
// removed.
type registrationRecorder struct {
	cache.SharedIndexInformer
	reg cache.ResourceEventHandlerRegistration
}

func (r *registrationRecorder) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := r.SharedIndexInformer.AddEventHandlerWithOptions(h, o)
	r.reg = reg
	return reg, err
}

package storecache

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/fxkube/fxkube/internal/kinds"
)

// handlers are the event handlers a cache added to the informers of one
// kind, removed when the cache removes the kind. The informers are shared
// stores: removing the kind must silence this cache's handlers, as
// controller-runtime's RemoveInformer does by stopping the informer, and
// leave every other consumer's.
type handlers struct {
	mu      sync.Mutex
	added   []addedHandler
	removed bool
}

type addedHandler struct {
	informer crcache.Informer
	reg      toolscache.ResourceEventHandlerRegistration
}

// add runs add on informer, and tracks the handler it adds.
func (hs *handlers) add(informer crcache.Informer, add func() (toolscache.ResourceEventHandlerRegistration, error)) (toolscache.ResourceEventHandlerRegistration, error) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.removed {
		return nil, errRemoved
	}
	reg, err := add()
	if err != nil {
		return nil, err
	}
	hs.added = append(hs.added, addedHandler{informer, reg})
	return reg, nil
}

// forget stops tracking reg, which its informer has removed.
func (hs *handlers) forget(reg toolscache.ResourceEventHandlerRegistration) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.added = slices.DeleteFunc(hs.added, func(a addedHandler) bool { return a.reg == reg })
}

// removeAll removes every handler added, and any added later.
func (hs *handlers) removeAll() error {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.removed = true
	var errs []error
	for _, a := range hs.added {
		errs = append(errs, a.informer.RemoveEventHandler(a.reg))
	}
	hs.added = nil
	return errors.Join(errs...)
}

func (hs *handlers) isRemoved() bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.removed
}

// errRemoved is what adding a handler to an informer of a removed kind
// returns, as client-go's stopped informers do.
var errRemoved = errors.New("the cache removed this informer (RemoveInformer); get it again with GetInformer")

// kindInformer is the informer a cache hands out for a kind: the kind's
// store's (or their union), whose handlers the cache removes with the
// kind. Once removed, it reports itself stopped and takes no handler.
type kindInformer struct {
	crcache.Informer
	ck *cachedKind
}

var _ crcache.Informer = kindInformer{}

// AddEventHandler implements crcache.Informer.
func (i kindInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.added(func() (toolscache.ResourceEventHandlerRegistration, error) { return i.Informer.AddEventHandler(h) })
}

// AddEventHandlerWithResyncPeriod implements crcache.Informer.
func (i kindInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.added(func() (toolscache.ResourceEventHandlerRegistration, error) {
		return i.Informer.AddEventHandlerWithResyncPeriod(h, resync)
	})
}

// AddEventHandlerWithOptions implements crcache.Informer.
func (i kindInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.added(func() (toolscache.ResourceEventHandlerRegistration, error) {
		return i.Informer.AddEventHandlerWithOptions(h, o)
	})
}

func (i kindInformer) added(add func() (toolscache.ResourceEventHandlerRegistration, error)) (toolscache.ResourceEventHandlerRegistration, error) {
	reg, err := i.ck.handlers.add(i.Informer, add)
	if errors.Is(err, errRemoved) {
		return nil, fmt.Errorf("add a handler for %s: %w", kinds.Name(i.ck.gvk), err)
	}
	return reg, err
}

// RemoveEventHandler implements crcache.Informer. Like client-go's, it
// may be called again for a handler removed already.
func (i kindInformer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	if err := i.Informer.RemoveEventHandler(reg); err != nil {
		return err
	}
	i.ck.handlers.forget(reg)
	return nil
}

// IsStopped implements crcache.Informer: true once the cache removed
// the kind, or if the store's informer has stopped.
func (i kindInformer) IsStopped() bool {
	return i.ck.handlers.isRemoved() || i.Informer.IsStopped()
}

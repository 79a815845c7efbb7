package informers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
)

// Handlers are the event handlers of one store, which follow it when the
// informer that serves it changes (Move):
//
//   - a handler is added to the store's informer of the moment;
//   - after a move, it has received exactly the changes between what it
//     had and what the new informer holds: an Update for an object whose
//     resourceVersion changed, a Delete for one gone, an Add for one new,
//     and nothing for the others;
//   - events keep coming one at a time, in order, as client-go's do.
//
// A handler can move only if it is tracked: it then keeps, for each object
// it was told of, the object (a pointer, not a copy). Untracked handlers
// cost nothing, and CanMove says false while one is added.
//
// After a move, each event of the new informer is told as the change
// between what the handler had and what the informer holds then, so the
// handler may skip intermediate versions, as a watch may.
type Handlers struct {
	name    string
	current func() cache.SharedIndexInformer
	track   func() bool

	mu     sync.Mutex
	regs   map[*Registration]struct{}
	moving cache.SharedIndexInformer // where handlers go while a move runs
}

// NewHandlers returns the handlers of a store named name: each added to
// current(), tracked when track() says so at the time.
func NewHandlers(name string, current func() cache.SharedIndexInformer, track func() bool) *Handlers {
	return &Handlers{name: name, current: current, track: track, regs: make(map[*Registration]struct{})}
}

// Add adds h with o to the store's informer; the registration it returns
// is the handler's for as long as it stays, across moves.
func (hs *Handlers) Add(h cache.ResourceEventHandler, o cache.HandlerOptions) (*Registration, error) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	target := hs.moving
	if target == nil {
		target = hs.current()
	}
	r := &Registration{handlers: hs, h: h, opts: o, synced: make(chan struct{}), gone: make(chan struct{})}
	if hs.track() {
		r.held = make(map[objectKey]any)
	}
	if err := r.attach(target, &r.on); err != nil {
		return nil, err
	}
	hs.regs[r] = struct{}{}
	return r, nil
}

// Remove removes the handler of reg. Removing it again does nothing.
func (hs *Handlers) Remove(reg cache.ResourceEventHandlerRegistration) error {
	r, ok := reg.(*Registration)
	if !ok || r.handlers != hs {
		return fmt.Errorf("%s: %T is not a registration of this store", hs.name, reg)
	}
	hs.mu.Lock()
	_, held := hs.regs[r]
	delete(hs.regs, r)
	hs.mu.Unlock()
	if !held {
		return nil
	}
	return r.remove()
}

// CanMove reports whether every handler is tracked, so that Move can keep
// each one's view.
func (hs *Handlers) CanMove() bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for r := range hs.regs {
		if r.held == nil {
			return false
		}
	}
	return true
}

// ErrNotMoved is what Move returns when the handlers stay where they were.
var ErrNotMoved = errors.New("the store's handlers stay on its informer")

// catchUpBound bounds how long Move waits for the new informer to hold what
// the handlers were told. A new informer catches up within milliseconds
// when it sees the same changes; one that sees none of its own would only
// with the API server's next bookmark, about a minute on.
const catchUpBound = 10 * time.Second

// Move moves every handler from the store's informer to, an informer that
// has synced. It pauses the handlers; waits until to holds at least what
// they were told (its last resourceVersion is as recent as theirs), within
// catchUpBound; calls swap, which makes to serve the store's reads, or
// returns false to give up; tells each handler what changed; and takes it
// off the old informer. Handlers added meanwhile go to to.
//
// Without the resourceVersions to compare (a client without the AtomicFIFO
// feature, or a fake API server), Move does not wait: a change of the
// instant of the move may then come as a Delete and an Add.
func (hs *Handlers) Move(ctx context.Context, to cache.SharedIndexInformer, swap func() bool) error {
	hs.mu.Lock()
	if hs.moving != nil {
		hs.mu.Unlock()
		return fmt.Errorf("%s: %w: it is moving already", hs.name, ErrNotMoved)
	}
	regs := make([]*Registration, 0, len(hs.regs))
	for r := range hs.regs {
		if r.held == nil {
			hs.mu.Unlock()
			return fmt.Errorf("%s: %w: a handler is not tracked", hs.name, ErrNotMoved)
		}
		regs = append(regs, r)
	}
	hs.moving = to
	hs.mu.Unlock()
	defer func() {
		hs.mu.Lock()
		hs.moving = nil
		hs.mu.Unlock()
	}()

	seen := ""
	for _, r := range regs {
		seen = newer(seen, r.pause())
	}
	var errs []error
	for _, r := range regs {
		errs = append(errs, r.attach(to, &r.next))
	}
	err := errors.Join(errs...)
	moved := err == nil && catchUp(ctx, to, seen) && swap()
	for _, r := range regs {
		r.settle(moved)
	}
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w: %w", hs.name, ErrNotMoved, err)
	case !moved:
		return fmt.Errorf("%s: %w", hs.name, ErrNotMoved)
	}
	return nil
}

// catchUp waits until to holds at least resourceVersion seen, within
// catchUpBound; false if ctx ends first.
func catchUp(ctx context.Context, to cache.SharedIndexInformer, seen string) bool {
	bound := time.NewTimer(catchUpBound)
	defer bound.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		at := to.GetIndexer().LastStoreSyncResourceVersion()
		if c, err := resourceversion.CompareResourceVersion(at, seen); err != nil || c >= 0 {
			return ctx.Err() == nil
		}
		select {
		case <-ctx.Done():
			return false
		case <-bound.C:
			return true
		case <-tick.C:
		}
	}
}

// newer returns the more recent of resourceVersions a and b, either when
// the other does not parse.
func newer(a, b string) string {
	if c, err := resourceversion.CompareResourceVersion(a, b); err == nil && c >= 0 || b == "" {
		return a
	}
	return b
}

// objectKey is an object's namespace and name, sharing their strings.
type objectKey struct{ namespace, name string }

func (k objectKey) String() string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

// keyOf returns the key of obj, an object or a tombstone.
func keyOf(obj any) (objectKey, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if o, ok := d.Obj.(metav1.Object); ok {
			return objectKey{o.GetNamespace(), o.GetName()}, true
		}
		ns, name, err := cache.SplitMetaNamespaceKey(d.Key)
		return objectKey{ns, name}, err == nil
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return objectKey{}, false
	}
	return objectKey{o.GetNamespace(), o.GetName()}, true
}

func resourceVersionOf(obj any) string {
	if o, ok := obj.(metav1.Object); ok {
		return o.GetResourceVersion()
	}
	return ""
}

// Registration is a handler added to Handlers. It implements
// cache.ResourceEventHandlerRegistration.
type Registration struct {
	handlers *Handlers
	h        cache.ResourceEventHandler
	opts     cache.HandlerOptions

	// regMu guards the handler's registrations on informers; it is never
	// held while the handler runs.
	regMu    sync.Mutex
	on       *attachment // where events are told from
	next     *attachment // where a move is taking the handler
	removed  bool
	gone     chan struct{} // closed once the handler is removed
	synced   chan struct{} // closed once the handler has had every object
	isSynced atomic.Bool

	// mu is held while the handler runs: events are told one at a time.
	mu sync.Mutex
	// held is what the handler was told, by key; nil for an untracked
	// handler. seen is the most recent resourceVersion it was told.
	held map[objectKey]any
	seen string
	// paused drops events while a move runs; moved tells each event as a
	// change against what on's informer holds (see tellKey).
	paused, moved bool
}

var _ cache.ResourceEventHandlerRegistration = (*Registration)(nil)

// attachment is a registration of the handler on one informer.
type attachment struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
}

// attach adds the handler to informer, as *at (r.on or r.next). The
// attachment is in place before the informer tells its first event: only
// r.on's events reach the handler.
func (r *Registration) attach(informer cache.SharedIndexInformer, at **attachment) error {
	a := &attachment{informer: informer}
	r.regMu.Lock()
	*at = a
	r.regMu.Unlock()
	reg, err := informer.AddEventHandlerWithOptions(attachedHandler{r, a}, r.opts)
	r.regMu.Lock()
	defer r.regMu.Unlock()
	switch {
	case err != nil:
		if *at == a {
			*at = nil
		}
		return err
	case r.removed:
		_ = informer.RemoveEventHandler(reg)
	}
	a.reg = reg
	return nil
}

// switchTo makes r.next, if there is one, the attachment events are told
// from, taking the handler off the one before. It returns the attachment
// told from, nil once removed.
func (r *Registration) switchTo() *attachment {
	r.regMu.Lock()
	defer r.regMu.Unlock()
	if r.next == nil {
		return r.on
	}
	old := r.on
	r.on, r.next = r.next, nil
	if old != nil && old.reg != nil {
		_ = old.informer.RemoveEventHandler(old.reg)
	}
	return r.on
}

// dropNext takes the handler off the informer a move was taking it to.
func (r *Registration) dropNext() {
	r.regMu.Lock()
	defer r.regMu.Unlock()
	if r.next != nil && r.next.reg != nil {
		_ = r.next.informer.RemoveEventHandler(r.next.reg)
	}
	r.next = nil
}

func (r *Registration) remove() error {
	r.regMu.Lock()
	defer r.regMu.Unlock()
	if !r.removed {
		close(r.gone)
	}
	r.removed = true
	var errs []error
	for _, a := range []*attachment{r.on, r.next} {
		if a != nil && a.reg != nil {
			errs = append(errs, a.informer.RemoveEventHandler(a.reg))
		}
	}
	r.on, r.next = nil, nil
	return errors.Join(errs...)
}

func (r *Registration) isOn(a *attachment) bool {
	r.regMu.Lock()
	defer r.regMu.Unlock()
	return r.on == a
}

// pause stops telling events, and returns the most recent resourceVersion
// the handler was told.
func (r *Registration) pause() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paused = true
	return r.seen
}

// settle ends a move: the handler is told from the informer it moved to,
// or, when it did not move, stays on its own. It is told what changed
// between what it holds and what that informer holds, as the events
// dropped while it was paused are, and resumes.
func (r *Registration) settle(moved bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !moved {
		r.dropNext()
	}
	on := r.switchTo()
	if on == nil {
		return // removed meanwhile
	}
	indexer := on.informer.GetIndexer()
	for _, key := range indexer.ListKeys() {
		if ns, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
			r.tellKey(indexer, objectKey{ns, name})
		}
	}
	for k := range r.held {
		if _, ok, _ := indexer.GetByKey(k.String()); !ok {
			r.tellKey(indexer, k)
		}
	}
	r.paused, r.moved = false, true
	r.markSynced()
}

// tellKey tells the handler how the object of key k changed between what
// it holds and what indexer holds, if it did. r.mu is held.
func (r *Registration) tellKey(indexer cache.Indexer, k objectKey) {
	was, had := r.held[k]
	is, has, _ := indexer.GetByKey(k.String())
	switch {
	case !has && !had:
	case !has:
		delete(r.held, k)
		r.h.OnDelete(was)
	case !had:
		r.held[k] = is
		r.note(is)
		r.h.OnAdd(is, false)
	case resourceVersionOf(is) != resourceVersionOf(was):
		r.held[k] = is
		r.note(is)
		r.h.OnUpdate(was, is)
	default:
		r.held[k] = is // the same version, perhaps made anew by a projection
	}
}

// note records obj's resourceVersion as seen. r.mu is held.
func (r *Registration) note(obj any) { r.seen = newer(r.seen, resourceVersionOf(obj)) }

// HasSynced implements cache.ResourceEventHandlerRegistration: the handler
// has had every object of the store, once.
func (r *Registration) HasSynced() bool {
	if r.isSynced.Load() {
		return true
	}
	if reg := r.onReg(); reg != nil && reg.HasSynced() {
		r.markSynced()
		return true
	}
	return false
}

// onReg returns the registration events are told from, nil while it is
// being made or once removed.
func (r *Registration) onReg() cache.ResourceEventHandlerRegistration {
	r.regMu.Lock()
	defer r.regMu.Unlock()
	if r.on == nil {
		return nil
	}
	return r.on.reg
}

// HasSyncedChecker implements cache.ResourceEventHandlerRegistration.
func (r *Registration) HasSyncedChecker() cache.DoneChecker {
	name := r.handlers.name + " handler"
	switch reg := r.onReg(); {
	case r.isSynced.Load():
		return AllDone(name, r.synced)
	case reg == nil:
		return AllDone(name, nil)
	default:
		// Done once the registration of now has synced, or a move has
		// told the handler every object; the wait ends, and its
		// goroutine with it, once the handler is removed.
		return AllDone(name, r.synced, Wait{Done: func() <-chan struct{} { return reg.HasSyncedChecker().Done() }, Gone: r.gone})
	}
}

func (r *Registration) markSynced() {
	if r.isSynced.CompareAndSwap(false, true) {
		close(r.synced)
	}
}

// attachedHandler passes the events of one attachment to the handler, while
// it is the one events are told from.
type attachedHandler struct {
	r *Registration
	a *attachment
}

func (x attachedHandler) OnAdd(obj any, isInInitialList bool) {
	x.tell(obj, func(r *Registration, k objectKey) {
		if r.held != nil {
			r.held[k] = obj
			r.note(obj)
		}
		r.h.OnAdd(obj, isInInitialList)
	})
}

func (x attachedHandler) OnUpdate(oldObj, newObj any) {
	x.tell(newObj, func(r *Registration, k objectKey) {
		if r.held != nil {
			r.held[k] = newObj
			r.note(newObj)
		}
		r.h.OnUpdate(oldObj, newObj)
	})
}

func (x attachedHandler) OnDelete(obj any) {
	x.tell(obj, func(r *Registration, k objectKey) {
		if r.held != nil {
			delete(r.held, k)
			// A filtered informer's object that stops matching is deleted
			// as its last matching version: what the informer holds is
			// at least as recent.
			r.seen = newer(r.seen, x.a.informer.GetIndexer().LastStoreSyncResourceVersion())
		}
		r.h.OnDelete(obj)
	})
}

// tell passes an event of obj on with pass, unless its attachment is not
// the one told from or the handler is paused; after a move, it tells the
// change against what the informer holds instead.
func (x attachedHandler) tell(obj any, pass func(*Registration, objectKey)) {
	r := x.r
	if !r.isOn(x.a) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paused {
		return
	}
	k, ok := keyOf(obj)
	if r.moved && ok {
		r.tellKey(x.a.informer.GetIndexer(), k)
		return
	}
	pass(r, k)
}

package fxstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// delay makes WaitForSync wait, besides every store, until release is
// called; name says in WaitForSync's errors what it waits for. The app's
// lifecycle delays the initial sync while controllers warm up, as some ask
// for their stores only then. Calling release again does nothing.
func (r *Registry) delay(name string) (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.delays == nil {
		r.delays = make(map[int]string)
	}
	r.delayID++
	id := r.delayID
	r.delays[id] = name
	return sync.OnceFunc(func() {
		r.mu.Lock()
		delete(r.delays, id)
		r.mu.Unlock()
		r.signal()
	})
}

// WaitForSync blocks until every store has synced and every delay has been
// released. It returns early with an error when a store cannot be started or
// meets a list/watch error that retrying cannot fix (such as forbidden or
// not found), and when ctx ends first; the error lists every store not
// synced and its last list/watch error. Once it has succeeded, stores
// requested later are reported as started late.
func (r *Registry) WaitForSync(ctx context.Context) error {
	err := r.waitFor(ctx, nil)
	if err == nil {
		r.mu.Lock()
		r.synced = true
		r.mu.Unlock()
	}
	return err
}

// WaitForStore blocks until the store with key has synced, failing early as
// WaitForSync does. Use it for stores requested after Start. A store
// requested after Start that could not start (its kind not served, or
// access denied) is tried again first, as its CRD or RBAC may have been
// fixed since.
func (r *Registry) WaitForStore(ctx context.Context, key Key) error {
	r.mu.Lock()
	if e, ok := r.entries[key]; ok && r.started && !r.stopped {
		r.retryLocked(e)
	}
	r.mu.Unlock()
	return r.waitFor(ctx, &key)
}

// waitFor waits for the store with key, or for every store and delay.
func (r *Registry) waitFor(ctx context.Context, key *Key) error {
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		w := r.waiting(key)
		switch {
		case len(w.permanent) > 0:
			return errors.Join(w.permanent...)
		case key != nil && w.total == 0:
			return fmt.Errorf("fxstore: no store %s", key)
		case len(w.pending) == 0 && len(w.delays) == 0:
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			// Stores requested since are in the diagnosis too.
			w = r.waiting(key)
			r.diagnoseSilent(w)
			pending := w.pending
			for _, d := range w.delays {
				pending = append(pending, fmt.Errorf("%s: not done", d))
			}
			if len(w.pending) == 0 {
				return fmt.Errorf("all %d stores synced; still waiting for %d more: %w\n%w", w.total, len(w.delays), ctx.Err(), errors.Join(pending...))
			}
			return fmt.Errorf("%d of %d stores not synced: %w\n%w", len(w.pending), w.total, ctx.Err(), errors.Join(pending...))
		}
	}
}

// waitState is what waitFor waits for: the stores not synced (those that
// cannot sync among them) and the delays not released.
type waitState struct {
	pending, permanent []error
	total              int
	delays             []string
	// silent are the stores in pending whose list/watch reported no
	// error, or one that does not say why and was not diagnosed yet.
	silent []silentStore
}

// silentStore is a store that did not sync without saying why, and its
// last list/watch error, if any.
type silentStore struct {
	*StoreError
	lastErr error
}

// listChecker is a Source that can list one object of a store's spec with
// a plain list: a streamed initial list that stalls reports no error, where
// a plain list says why (a conversion webhook that cannot be reached).
type listChecker interface {
	CheckList(ctx context.Context, key Key) error
}

// diagnoseSilentTimeout bounds each list diagnoseSilent, and the diagnosis
// of a store that begins to fail, makes.
const diagnoseSilentTimeout = 5 * time.Second

// diagnoseSilent lists one object of each store that did not sync without
// saying why, and gives the list's error, if any, as the cause.
func (r *Registry) diagnoseSilent(w waitState) {
	r.mu.Lock()
	checker, ok := r.src.(listChecker)
	r.mu.Unlock()
	if !ok {
		return
	}
	var wg sync.WaitGroup
	for _, s := range w.silent {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), diagnoseSilentTimeout)
			defer cancel()
			switch err := checker.CheckList(ctx, s.Key); {
			case err == nil:
			case s.lastErr == nil:
				s.Err = fmt.Errorf("not synced; its watch reports no error, but a list fails: %w", err)
			default:
				s.Err = notSyncedCause(&diagnosedError{err: s.lastErr, list: err})
			}
		})
	}
	wg.Wait()
}

func (r *Registry) waiting(key *Key) waitState {
	var (
		w       waitState
		entries []*entry
	)
	r.mu.Lock()
	switch e, ok := r.entries[deref(key)]; {
	case key == nil:
		w.delays = slices.Sorted(maps.Values(r.delays))
		entries = slices.Clone(r.order)
	case ok:
		entries = []*entry{e}
	}
	r.mu.Unlock()
	// Waiting runs at each change: it does not size the stores.
	for _, e := range entries {
		if e.served.waiting.Load() {
			continue // not started: nothing to wait for
		}
		info := e.info()
		w.total++
		if info.Status.Synced {
			continue
		}
		err := &StoreError{Key: info.Key, Err: notSyncedCause(info.Status.LastError)}
		w.pending = append(w.pending, err)
		if lastErr := info.Status.LastError; lastErr == nil || unexplained(lastErr) && !errors.As(lastErr, new(*diagnosedError)) {
			w.silent = append(w.silent, silentStore{err, lastErr})
		}
		if isPermanent(info.Status.LastError) {
			w.permanent = append(w.permanent, err)
		}
	}
	return w
}

// deref returns *key, or the zero Key for nil.
func deref(key *Key) Key {
	if key == nil {
		return Key{}
	}
	return *key
}

func notSyncedCause(lastErr error) error {
	var bind *bindError
	if errors.As(lastErr, &bind) {
		// A view's names its parent, whose bind failed.
		return fmt.Errorf("cannot start: %w", lastErr)
	}
	if lastErr == nil {
		return errors.New("not synced; no list/watch error reported (the API server may be slow, or the list very large)")
	}
	return fmt.Errorf("not synced; last list/watch error: %w", lastErr)
}

// isPermanent reports list/watch errors that client-go would retry forever
// without success.
func isPermanent(err error) bool {
	var bind *bindError
	return err != nil && (errors.As(err, &bind) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err))
}

// goDiagnose runs diagnose, which lists through c, on a goroutine of the
// registry, unless the registry has stopped or its source cannot list
// plainly. It reports whether diagnose runs. Stop waits for it.
func (r *Registry) goDiagnose(diagnose func(c listChecker)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.src.(listChecker)
	if !ok || r.stopped {
		return false
	}
	r.wg.Go(func() { diagnose(c) })
	return true
}

func (r *Registry) signal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signalLocked()
}

// signalLocked is signal with the registry's lock held.
func (r *Registry) signalLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

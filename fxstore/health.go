package fxstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// watchError records a list/watch error. The first that is not routine
// marks the store failing. One that does not say why is diagnosed first,
// off the informer's goroutine, so that the failure is announced with its
// cause.
func (e *entry) watchError(ctx context.Context, _ *cache.Reflector, err error) {
	failing := !isRoutine(err)
	now := time.Now()
	e.mu.Lock()
	e.lastErr = err
	e.watchFails++
	began := failing && e.failingSince.IsZero()
	if began {
		e.failingSince = now
	}
	e.mu.Unlock()
	switch {
	case began && unexplained(err) && e.registry.goDiagnose(func(c listChecker) { e.diagnose(ctx, now, c) }):
	case began:
		e.announceFailing(now, nil)
	case failing:
		e.registry.log.Debug("store list/watch failed again; retrying", zap.Stringer("store", e.key), zap.Error(err))
	}
	e.registry.signal()
}

// diagnose lists one object of the store plainly, for the failure that
// began at since, and announces the failure with the list's error. A
// conversion webhook that fails leaves a watch only timeouts ("Too large
// resource version"); a plain list names the webhook and its error.
func (e *entry) diagnose(ctx context.Context, since time.Time, c listChecker) {
	listCtx, cancel := context.WithTimeout(ctx, diagnoseSilentTimeout)
	defer cancel()
	err := c.CheckList(listCtx, e.key)
	switch {
	case ctx.Err() != nil:
		return // the store stops
	case listCtx.Err() != nil:
		err = nil // the list says no more than the watch
	}
	e.announceFailing(since, err)
}

// announceFailing logs that the store began to fail at since, with what a
// plain list said if it was diagnosed, and tells its health handlers:
// once per failure, and not once it has recovered.
func (e *entry) announceFailing(since time.Time, diagnosis error) {
	e.mu.Lock()
	current := e.failingSince.Equal(since) && !e.announced
	if current {
		e.announced, e.diagnosis = true, diagnosis
	}
	err := e.reportedErrLocked()
	e.mu.Unlock()
	if !current {
		return
	}
	e.registry.log.Warn("store failing: its list/watch fails, and its objects grow stale while it retries",
		zap.Stringer("store", e.key), zap.Error(err))
	e.registry.healthChanged(e)
}

// reportedErrLocked returns the last list/watch error, with what a plain
// list said when that error does not say why. e.mu is held.
func (e *entry) reportedErrLocked() error {
	if e.diagnosis != nil && unexplained(e.lastErr) {
		return &diagnosedError{err: e.lastErr, list: e.diagnosis}
	}
	return e.lastErr
}

// diagnosedError is a list/watch error that does not say why, with the
// error of a plain list made to find out.
type diagnosedError struct{ err, list error }

func (e *diagnosedError) Error() string {
	return fmt.Sprintf("%v; a plain list of one object says why: %v", e.err, e.list)
}

func (e *diagnosedError) Unwrap() []error { return []error{e.err, e.list} }

// unexplained reports list/watch errors that do not say why: timeouts. A
// conversion webhook that fails gives a watch of the converted version
// only "Too large resource version", a timeout.
func unexplained(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// isRoutine reports list/watch errors that are part of a watch's life: it
// ended (its timeout, or a proxy closing it), or must list again (its
// resource version expired), or the store stops. client-go's default
// watch error handler logs these at debug levels too. So is the error
// event client-go makes of a watch stream that broke (such as when the
// store stops it): the reflector watches again at once, and an API server
// that is away refuses that.
func isRoutine(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || apierrors.HasStatusCause(err, clientWatchDecoding)
}

// clientWatchDecoding is the cause client-go's REST client gives the error
// event it makes when it cannot read a watch stream.
const clientWatchDecoding metav1.CauseType = "ClientWatchDecoding"

// listWatchSucceeded clears the last list/watch error once the source
// works again (see lazyListerWatcher.succeeded), so that a store that has
// recovered, such as one whose CRD was deleted and created again, no longer
// reports an error.
func (e *entry) listWatchSucceeded() {
	e.mu.Lock()
	lastErr, announced := e.reportedErrLocked(), e.announced
	since := e.failingSince
	e.lastErr, e.failingSince, e.announced, e.diagnosis = nil, time.Time{}, false, nil
	e.mu.Unlock()
	// A failure not announced yet, as it was being diagnosed, ends unheard.
	if announced {
		e.registry.log.Info("store recovered", zap.Stringer("store", e.key),
			zap.Duration("failedFor", time.Since(since)), zap.NamedError("previousError", lastErr))
		e.registry.healthChanged(e)
	}
	if lastErr != nil {
		e.registry.signal()
	}
}

// health returns since when the list/watch feeding the store has failed,
// and its last error; since is zero while it works, and while the failure
// is diagnosed. It is its backing's: a view's is its parent's.
func (e *entry) health() (since time.Time, err error) { return e.backing().health() }

// ownHealth is health for a store whose own list/watch feeds it.
func (e *entry) ownHealth() (since time.Time, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failingSince.IsZero() || !e.announced {
		return time.Time{}, nil
	}
	return e.failingSince, e.reportedErrLocked()
}

// failure is what Store.Err returns: nil while the store works.
func (e *entry) failure() error {
	since, err := e.health()
	return storeFailure(e.key, since, err)
}

// storeFailure is the failure of the store of key, failing since since
// with err: nil when since is zero.
func storeFailure(key Key, since time.Time, err error) error {
	if since.IsZero() {
		return nil
	}
	return &StoreError{Key: key, Err: &FailingError{Since: since, Err: err}}
}

// notifyHealth tells e's health handlers of a transition.
func (e *entry) notifyHealth() {
	err := e.failure()
	e.mu.Lock()
	handlers := slices.Collect(maps.Values(e.healthHandlers))
	e.mu.Unlock()
	for _, h := range handlers {
		h.OnHealth(err)
	}
}

// healthChanged tells the health handlers of e, and of the stores served
// as views of it, that e began to fail or works again.
func (r *Registry) healthChanged(e *entry) {
	r.mu.Lock()
	affected := append([]*entry{e}, slices.Collect(maps.Keys(e.views))...)
	r.mu.Unlock()
	for _, o := range affected {
		o.notifyHealth()
	}
}

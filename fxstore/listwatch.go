package fxstore

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// lazyListerWatcher lets the informer exist, and take handlers and indexers,
// before the store is bound to a source. It counts the objects the source
// sends, in lists and in watches, where they arrive: the informer's
// transform is no place to count, as client-go runs it twice on an initial
// list streamed in a watch (once in the reflector's temporary store, once
// in the queue's Replace). For a sharded store it drops the objects outside
// the shard, which the API server sends when it does not apply shard
// selectors.
//
// It also reports the errors that client-go's reflector handles without
// telling its watch error handler, and when the source works again.
type lazyListerWatcher struct {
	cache.ListerWatcher
	// succeeded is called when the source works: after each list it
	// answers, and after each watch it accepts, unless the last watch ended
	// on an error event; then on the first event a watch delivers.
	succeeded func()
	// failed is called with each error the reflector retries without
	// telling its watch error handler: a watch refused with connection
	// refused or 429 (the API server is away or overloaded), and each error
	// event a watch delivers that is not routine (see isRoutine).
	failed func(context.Context, error)
	// errorEvent is set while the last watch ended on an error event. The
	// reflector watches again at once, and the API server accepts a watch
	// it then ends with the same error, such as when a conversion webhook
	// fails: accepting it is no sign of recovery.
	errorEvent atomic.Bool
	// received counts the objects listed and the watch events received.
	received *atomic.Int64
	// inShard is nil unless the store is sharded; outsideShard is called
	// on each object dropped for being outside the shard.
	inShard      func(k8sruntime.Object) bool
	outsideShard func()
}

func (l *lazyListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (k8sruntime.Object, error) {
	list, err := cache.ToListerWatcherWithContext(l.ListerWatcher).ListWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	l.received.Add(int64(meta.LenList(list)))
	if l.inShard != nil {
		if err := l.keepShard(list); err != nil {
			return nil, err
		}
	}
	l.errorEvent.Store(false)
	if l.succeeded != nil {
		l.succeeded()
	}
	return list, nil
}

// keepShard removes from list the objects outside the shard.
func (l *lazyListerWatcher) keepShard(list k8sruntime.Object) error {
	outside := 0
	_ = meta.EachListItem(list, func(o k8sruntime.Object) error {
		if !l.inShard(o) {
			outside++
		}
		return nil
	})
	if outside == 0 {
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	items = slices.DeleteFunc(items, func(o k8sruntime.Object) bool { return !l.inShard(o) })
	for range outside {
		l.outsideShard()
	}
	return meta.SetList(list, items)
}

func (l *lazyListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := cache.ToListerWatcherWithContext(l.ListerWatcher).WatchWithContext(ctx, opts)
	if err != nil {
		if l.failed != nil && (utilnet.IsConnectionRefused(err) || apierrors.IsTooManyRequests(err)) {
			l.failed(ctx, err)
		}
		return nil, err
	}
	if !l.errorEvent.Load() && l.succeeded != nil {
		l.succeeded()
	}
	return newReceivingWatch(ctx, w, l), nil
}

// delivered records that a watch delivered an event of the source: after
// an error event, the source works again.
func (l *lazyListerWatcher) delivered() {
	// Load first: most events find it unset, and a swap writes.
	if l.errorEvent.Load() && l.errorEvent.CompareAndSwap(true, false) && l.succeeded != nil {
		l.succeeded()
	}
}

// errorEventReceived reports the error of an error event, unless it is
// routine. A watch that ends on one makes the reflector watch again (or
// list, or stream its list again) without telling its watch error handler.
func (l *lazyListerWatcher) errorEventReceived(ctx context.Context, ev watch.Event) {
	err := apierrors.FromObject(ev.Object)
	if isRoutine(err) || ctx.Err() != nil {
		return
	}
	l.errorEvent.Store(true)
	if l.failed != nil {
		l.failed(ctx, err)
	}
}

// IsWatchListSemanticsUnSupported passes on whether the bound source can
// stream its initial list in a watch.
func (l *lazyListerWatcher) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.ListerWatcher)
}

// receivingWatch passes a watch's events on, counting those that carry an
// object of the store (not bookmarks or errors), dropping those outside a
// sharded store's shard, and telling its lazyListerWatcher of events and
// error events. Unlike watch.Filter, its goroutine ends when the watch is
// stopped even if no one reads any more.
type receivingWatch struct {
	in       watch.Interface
	out      chan watch.Event
	stopped  chan struct{}
	stopOnce sync.Once
}

func newReceivingWatch(ctx context.Context, in watch.Interface, l *lazyListerWatcher) *receivingWatch {
	w := &receivingWatch{in: in, out: make(chan watch.Event), stopped: make(chan struct{})}
	go func() {
		defer close(w.out)
		for ev := range in.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				l.received.Add(1)
				l.delivered()
				if l.inShard != nil && !l.inShard(ev.Object) {
					l.outsideShard()
					continue
				}
			case watch.Bookmark:
				l.delivered()
			case watch.Error:
				if !w.isStopped() {
					l.errorEventReceived(ctx, ev)
				}
			}
			select {
			case w.out <- ev:
			case <-w.stopped:
				return
			}
		}
	}()
	return w
}

// ResultChan implements watch.Interface.
func (w *receivingWatch) ResultChan() <-chan watch.Event { return w.out }

// isStopped reports whether the watch was stopped: an error event after
// that is of the stream that broke as it closed.
func (w *receivingWatch) isStopped() bool {
	select {
	case <-w.stopped:
		return true
	default:
		return false
	}
}

// Stop implements watch.Interface.
func (w *receivingWatch) Stop() {
	w.stopOnce.Do(func() { close(w.stopped) })
	w.in.Stop()
}

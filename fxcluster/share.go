package fxcluster

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxshard"
)

// A fleet shares its members out among the app's replicas when
// Options.Share is set. The members' names are hashed into fxshard's
// buckets, each held by one replica at a time through a Lease, with
// fencing:
//
//   - every replica hears of every member from its providers, and keeps
//     it as an offer;
//   - a member joins only on the replica holding its bucket, and its
//     controllers run there, leader or not;
//   - a replica giving a bucket up makes its members leave: no request
//     starts, work in flight finishes within the stop timeout, then the
//     member's stores are freed; only then is the Lease given back;
//   - a replica that stops renewing (it crashed, or is cut off) stops
//     its members' work at the renew deadline; the others take its
//     buckets once the Lease has expired.
//
// So no member is reconciled by two replicas at once.

// offer is a member a provider engaged: it joins on this replica while
// the replica holds its bucket, or always when the fleet does not share.
type offer struct {
	name   ClusterName
	conn   *connection.Connection
	bucket int
}

var _ fxshard.Handler = (*shareHandler)(nil)

// shareHandler is the fleet's fxshard.Handler.
type shareHandler struct{ f *Fleet }

// Acquired implements fxshard.Handler: the members offered in bucket
// join.
func (h shareHandler) Acquired(bucket int) {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	for _, o := range f.offers {
		if o.bucket != bucket {
			continue
		}
		if m := f.members[o.name]; m != nil && m.offer == o && m.ctx.Err() == nil {
			continue // joined already
		}
		f.startLocked(o)
	}
}

// Releasing implements fxshard.Handler: the members of bucket leave, and
// it returns once they have. Once ctx ends, another replica may take
// them over: their reconciles still in flight are ended then.
func (h shareHandler) Releasing(ctx context.Context, bucket int) {
	f := h.f
	f.mu.Lock()
	var leaving []*member
	for _, m := range f.members {
		if m.offer.bucket == bucket {
			m.leave()
			leaving = append(leaving, m)
		}
	}
	f.mu.Unlock()
	for _, m := range leaving {
		select {
		case <-m.done:
		case <-ctx.Done():
			m.log.Warn("member's work still in flight as its bucket may go to another replica; ending it")
			m.endHard(errGivenAway)
			<-m.done
		}
	}
}

// errGivenAway is the cause of a reconcile's context ended as its
// member's bucket went to another replica.
var errGivenAway = errors.New("the cluster went to another replica")

// newCoordinator returns the fleet's Coordinator, when it shares its
// members out, or nil.
func (f *Fleet) newCoordinator() (*fxshard.Coordinator, error) {
	if f.opts.Share == nil {
		return nil, nil
	}
	if f.opts.Leases == nil {
		return nil, errors.New("fxcluster: Options.Share needs Options.Leases, a client of the app's own cluster for the Leases")
	}
	cfg := *f.opts.Share
	if cfg.Logger == nil {
		cfg.Logger = f.log.Named("fxshard")
	}
	c, err := fxshard.New(f.opts.Leases, shareHandler{f}, cfg)
	if err != nil {
		return nil, fmt.Errorf("share member clusters out among replicas: %w", err)
	}
	return c, nil
}

// Sharing returns how the fleet shares its members out among replicas,
// its Leases' namespace defaulted; nil when it does not.
func (f *Fleet) Sharing() *fxshard.Config { return f.opts.Share }

// bucketOf returns the bucket of the member name, or 0 when the fleet
// does not share.
func (f *Fleet) bucketOf(name ClusterName) int {
	if f.coordinator == nil {
		return 0
	}
	return f.coordinator.Buckets().OfValue(string(name))
}

// owns reports whether the members of bucket are this replica's to run:
// always, unless the fleet shares its members out.
func (f *Fleet) owns(bucket int) bool {
	return f.coordinator == nil || f.coordinator.Owns(bucket)
}

// runCoordinator takes part in the group of replicas until ctx ends, then
// gives every bucket back: their members leave first.
func (f *Fleet) runCoordinator(ctx context.Context) {
	if f.coordinator == nil {
		return
	}
	f.coordinating.Go(func() {
		if err := f.coordinator.Run(ctx); err != nil {
			f.log.Error("cannot share member clusters out among replicas; no member joins on this replica", zap.Error(err))
			f.mu.Lock()
			f.providerErrs = append(f.providerErrs, err)
			f.mu.Unlock()
		}
	})
}

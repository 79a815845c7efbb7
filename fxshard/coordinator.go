package fxshard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Coordinator holds this replica's share of the buckets of a group of
// replicas, through Leases; see the package documentation.
//
// Its Leases are read and written through client-go's resourcelock.LeaseLock,
// as leader election does, but not through leaderelection.LeaderElector,
// one per bucket: with ReleaseOnCancel, an elector releases its Lease
// before it calls OnStoppedLeading, even after a failed renewal (client-go
// v0.37.2 leaderelection.go:308-311), so another replica could take a bucket
// while this one still runs its work. Here a bucket is released only once
// Releasing has returned.
type Coordinator struct {
	cfg          Config
	client       kubernetes.Interface
	handler      Handler
	log          *zap.Logger
	buckets      Buckets
	leaseSeconds int // LeaseDuration written in the Leases, rounded up
	bucketByName map[string]int
	memberPrefix string

	// epoch is the origin of the deadlines in owns, so that Owns compares
	// monotonic times with a single atomic load.
	epoch time.Time
	// owns holds, for each bucket held, the end of its fence (RenewDeadline
	// after the start of its last renewal) in nanoseconds since epoch, and
	// 0 for the others.
	owns []atomic.Int64

	acquired, released, lost atomic.Uint64

	started atomic.Bool
	member  *resourcelock.LeaseLock
	joined  metav1.Time
	// inGroup is true while this replica is a member of the group: from
	// the end of its first rebalance (its member Lease written, the
	// group's Leases read, the free buckets of its share tried once) to
	// the start of leave. Until then, the buckets it holds (none) say
	// nothing of its share.
	inGroup atomic.Bool

	changed chan struct{} // a Lease changed; holds at most one signal
	drained chan int      // buckets whose Releasing returned
	drains  sync.WaitGroup

	mu       sync.Mutex
	base     context.Context // Run's context without its cancellation, for drains
	held     []bucketHold
	observed map[string]observation // by Lease name
	members  []string               // live identities, sorted, as last seen
}

// holdState is where this replica is with one bucket.
type holdState uint8

const (
	free      holdState = iota // not held here
	held                       // held and renewed; Owns is true
	releasing                  // given up: Releasing runs; still renewed, so that no one takes it before the drain ends
	lost                       // renewals failed for RenewDeadline, or another took it: Releasing runs; not renewed
)

type bucketHold struct {
	// lock is used only by the loop of Run and the requests it waits for.
	lock    *resourcelock.LeaseLock
	state   holdState
	record  resourcelock.LeaderElectionRecord // last written here
	renewed time.Time                         // start of the last successful write of record
	fence   *time.Timer                       // fires RenewDeadline after renewed
}

// observation is a Lease as this replica last saw it, and when it first saw
// that record, on its own clock.
type observation struct {
	record          resourcelock.LeaderElectionRecord
	resourceVersion string
	at              time.Time
	collected       bool // a delete of this expired member Lease was sent
}

// Handovers counts the buckets that changed hands at one replica. Acquired
// is Released + Lost + the buckets held.
type Handovers struct {
	Acquired uint64 // buckets taken
	Released uint64 // buckets given up, to even out the shares or on stop
	Lost     uint64 // buckets stopped because renewals failed for RenewDeadline, or their Lease went to another replica or was deleted
}

// New returns a Coordinator of cfg's buckets, whose Leases it reads and
// writes through client; handler starts and stops each bucket's work. It
// does no I/O: Run does.
func New(client kubernetes.Interface, handler Handler, cfg Config) (*Coordinator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if client == nil {
		return nil, errors.New("fxshard: New needs a client for the Leases; pass the app's kubernetes.Interface")
	}
	if handler == nil {
		return nil, errors.New("fxshard: New needs a Handler; pass the one that starts and drains each bucket's work")
	}
	c := &Coordinator{
		cfg:          cfg,
		client:       client,
		handler:      handler,
		log:          cfg.Logger.With(zap.String("shard", cfg.Namespace+"/"+cfg.Name), zap.String("identity", cfg.Identity)),
		buckets:      Buckets{n: uint64(cfg.Buckets)}, // checked by withDefaults
		leaseSeconds: int(math.Ceil(cfg.LeaseDuration.Seconds())),
		bucketByName: make(map[string]int, cfg.Buckets),
		memberPrefix: cfg.memberLeasePrefix(),
		epoch:        time.Now(),
		owns:         make([]atomic.Int64, cfg.Buckets),
		member:       cfg.leaseLock(client, cfg.memberLeaseName()),
		changed:      make(chan struct{}, 1),
		drained:      make(chan int, cfg.Buckets),
		held:         make([]bucketHold, cfg.Buckets),
		observed:     map[string]observation{},
	}
	for b := range c.held {
		name := cfg.bucketLeaseName(b)
		c.bucketByName[name] = b
		c.held[b].lock = cfg.leaseLock(client, name)
	}
	return c, nil
}

func (c Config) leaseLock(client kubernetes.Interface, name string) *resourcelock.LeaseLock {
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: c.Namespace, Name: name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.Identity},
		Labels:     map[string]string{LeaseLabel: c.Name},
	}
}

// Identity returns this replica's identity in the Leases.
func (c *Coordinator) Identity() string { return c.cfg.Identity }

// Buckets returns the buckets the coordinator shares out, to compute an
// object's bucket or the shard selector of Owned.
func (c *Coordinator) Buckets() Buckets { return c.buckets }

// Owns reports whether this replica holds bucket: it has acquired it,
// renewed it within RenewDeadline, and not called Releasing for it. It is
// one atomic load and a read of the monotonic clock, for every dispatch.
func (c *Coordinator) Owns(bucket int) bool {
	if bucket < 0 || bucket >= len(c.owns) {
		return false
	}
	end := c.owns[bucket].Load()
	return end != 0 && int64(time.Since(c.epoch)) < end
}

// Owned returns the buckets this replica holds, in order.
func (c *Coordinator) Owned() []int {
	var owned []int
	for b := range c.owns {
		if c.Owns(b) {
			owned = append(owned, b)
		}
	}
	return owned
}

// Members returns the identities of the live members of the group, this
// replica included, sorted, as the coordinator last counted them.
func (c *Coordinator) Members() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.members)
}

// Handovers returns the counts of buckets acquired, released and lost here.
func (c *Coordinator) Handovers() Handovers {
	return Handovers{Acquired: c.acquired.Load(), Released: c.released.Load(), Lost: c.lost.Load()}
}

// Run joins the group, takes and gives back buckets until ctx ends, and then
// leaves: it drains and releases every bucket it holds and deletes its
// member Lease. It returns an error when its member Lease cannot be written
// at first (Leases forbidden, no such namespace); otherwise nil, once every
// Releasing it called has returned. A Coordinator runs once.
func (c *Coordinator) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("fxshard: Coordinator.Run called twice; make a new Coordinator for each run")
	}
	base := context.WithoutCancel(ctx)
	c.mu.Lock()
	c.base = base
	c.mu.Unlock()

	c.joined = metav1.NewTime(time.Now())
	join, cancel := context.WithTimeout(ctx, c.cfg.RenewDeadline)
	err := c.renewMember(join)
	cancel()
	if err != nil {
		return fmt.Errorf("fxshard: join %s/%s: write member Lease %s: %w", c.cfg.Namespace, c.cfg.Name, c.member.LeaseMeta.Name, err)
	}
	c.log.Info("joined", zap.String("lease", c.member.LeaseMeta.Name))

	informer, err := c.informer()
	if err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(base)
	var watching sync.WaitGroup
	watching.Go(func() { informer.RunWithContext(watchCtx) })
	defer func() {
		stopWatch()
		watching.Wait()
	}()

	if cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		c.lead(ctx, base)
	}
	c.leave(base)
	return nil
}

// informer watches the group's Leases. Watching, rather than listing every
// RetryPeriod, costs one request per replica instead of one per
// RetryPeriod, and sees a released bucket at once, so that a clean
// hand-over takes a round trip, not a RetryPeriod. What it shows only
// decides which Leases are worth a try: a bucket is taken after a fresh read.
func (c *Coordinator) informer() (cache.SharedIndexInformer, error) {
	selector := labels.Set{LeaseLabel: c.cfg.Name}.AsSelector().String()
	informer := coordinationinformers.NewFilteredLeaseInformer(c.client, c.cfg.Namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.observeLease,
		UpdateFunc: func(_, obj any) { c.observeLease(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if lease, ok := obj.(*coordinationv1.Lease); ok {
				c.forget(lease.Name)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("fxshard: watch Leases: %w", err)
	}
	return informer, nil
}

func (c *Coordinator) observeLease(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	record := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	c.mu.Lock()
	c.observe(lease.Name, *record, lease.ResourceVersion, time.Now())
	c.mu.Unlock()
	c.notify()
}

// forget records that a Lease is gone. A member Lease goes when its member
// stops. A bucket Lease should not go, but if someone deletes one, it is
// free to every replica that did not see it go, while its holder learns at
// its next renewal: to those who saw it, the deletion counts as a change of
// the record, so that they wait LeaseDuration from there.
func (c *Coordinator) forget(name string) {
	c.mu.Lock()
	if _, ok := c.bucketByName[name]; !ok {
		delete(c.observed, name)
	} else if o, ok := c.observed[name]; ok {
		o.at = time.Now()
		c.observed[name] = o
	}
	c.mu.Unlock()
	c.notify()
}

// observe records a Lease's record as seen at now, keeping the time it was
// first seen while the record does not change. c.mu is held.
func (c *Coordinator) observe(name string, record resourcelock.LeaderElectionRecord, resourceVersion string, now time.Time) observation {
	o, ok := c.observed[name]
	if !ok || !sameRecord(o.record, record) {
		o = observation{record: record, at: now}
	}
	if resourceVersion != "" {
		o.resourceVersion = resourceVersion
	}
	c.observed[name] = o
	return o
}

// sameRecord reports whether a and b are the same record, to the
// microsecond of the Lease's times. client-go compares records as JSON,
// whose times have whole seconds: renewals more frequent than once a second
// would look like no change, and a Lease would seem to expire up to a
// second early.
func sameRecord(a, b resourcelock.LeaderElectionRecord) bool {
	return a.HolderIdentity == b.HolderIdentity && a.LeaseDurationSeconds == b.LeaseDurationSeconds &&
		a.LeaderTransitions == b.LeaderTransitions && a.AcquireTime.Equal(&b.AcquireTime) &&
		a.RenewTime.Equal(&b.RenewTime) && a.Strategy == b.Strategy && a.PreferredHolder == b.PreferredHolder
}

// expired reports whether the holder of o has had LeaseDuration to renew
// it since this replica saw it last change, and did not: the longer of this
// replica's LeaseDuration and the one the holder wrote, so that replicas
// with different settings still wait as long as the holder counts on.
func (c *Coordinator) expired(o observation, now time.Time) bool {
	wait := max(c.cfg.LeaseDuration, time.Duration(o.record.LeaseDurationSeconds)*time.Second)
	return now.Sub(o.at) > wait
}

func (c *Coordinator) notify() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// lead renews, takes and gives back buckets until ctx ends. The requests it
// sends run under base, bounded each, so that none is cut short by the stop.
func (c *Coordinator) lead(ctx, base context.Context) {
	tick := time.NewTicker(c.cfg.RetryPeriod)
	defer tick.Stop()
	c.rebalance(base)
	c.inGroup.Store(true)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.renew(base, true)
			c.rebalance(base)
		case <-c.changed:
			c.rebalance(base)
		case b := <-c.drained:
			c.release(base, b)
		}
	}
}

// leave drains and releases every bucket held, and deletes the member Lease
// meanwhile, so that the others count one member less by the time the
// buckets are free and take each at once.
func (c *Coordinator) leave(ctx context.Context) {
	c.inGroup.Store(false)
	c.mu.Lock()
	for b := range c.held {
		if c.held[b].state == held {
			c.giveUp(b, "stopping")
		}
	}
	c.mu.Unlock()

	del, cancel := context.WithTimeout(ctx, c.cfg.RenewDeadline)
	err := c.client.CoordinationV1().Leases(c.cfg.Namespace).Delete(del, c.member.LeaseMeta.Name, metav1.DeleteOptions{})
	cancel()
	if err != nil && !apierrors.IsNotFound(err) {
		c.log.Warn("member Lease not deleted; the others count this replica for LeaseDuration more", zap.Error(err))
	}

	tick := time.NewTicker(c.cfg.RetryPeriod)
	defer tick.Stop()
	for c.busy() {
		select {
		case <-tick.C:
			c.renew(ctx, false)
		case b := <-c.drained:
			c.release(ctx, b)
		}
	}
	c.drains.Wait()
	c.log.Info("left")
}

// busy reports whether a bucket is held or draining.
func (c *Coordinator) busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.held, func(h bucketHold) bool { return h.state != free })
}

// rebalance takes free buckets up to this replica's fair share, gives back
// those above it, and deletes the member Leases of members gone.
func (c *Coordinator) rebalance(ctx context.Context) {
	now := time.Now()
	c.mu.Lock()
	members, gone := c.liveMembers(now)
	changed := !slices.Equal(members, c.members)
	c.members = members
	k, _ := slices.BinarySearch(members, c.cfg.Identity)
	share := fairShare(len(c.held), len(members), k)
	var mine, takeable []int
	for b := range c.held {
		switch {
		case c.held[b].state == held:
			mine = append(mine, b)
		case c.held[b].state == free && c.takeable(b, now):
			takeable = append(takeable, b)
		}
	}
	if len(mine) > share {
		for _, b := range mine[share:] {
			c.giveUp(b, "above the fair share")
		}
	}
	c.mu.Unlock()
	if changed {
		c.log.Info("members changed", zap.Int("members", len(members)), zap.Int("share", share), zap.Strings("identities", members))
	}
	if want := share - len(mine); want > 0 && len(takeable) > 0 {
		// Member k of R starts k/R of the way along the free buckets, so
		// that members that want buckets at once seldom race for the same.
		start := k * len(takeable) / len(members)
		takeable = slices.Concat(takeable[start:], takeable[:start])
		c.acquire(ctx, takeable[:min(want, len(takeable))])
	}
	c.collect(ctx, gone)
}

// fairShare returns the share of member k of r members sorted by identity:
// b/r buckets, one more for the first b%r members.
func fairShare(b, r, k int) int {
	share := b / r
	if k < b%r {
		share++
	}
	return share
}

// liveMembers returns the identities of the members whose Lease changed
// within LeaseDuration, this replica's included, sorted; and the names of
// expired member Leases to delete. c.mu is held.
func (c *Coordinator) liveMembers(now time.Time) (live []string, gone []string) {
	live = []string{c.cfg.Identity}
	for name, o := range c.observed {
		if !strings.HasPrefix(name, c.memberPrefix) {
			continue
		}
		switch {
		case o.record.HolderIdentity != "" && !c.expired(o, now):
			live = append(live, o.record.HolderIdentity)
		case !o.collected && o.record.HolderIdentity != c.cfg.Identity:
			gone = append(gone, name)
		}
	}
	slices.Sort(live)
	return slices.Compact(live), gone
}

// takeable reports whether bucket b looks free from here: no Lease, no
// holder, or a holder that let it expire. A Lease that names this replica
// while it does not hold it is one it held and drained, or took by a write
// whose answer was lost: it may take it at once. c.mu is held.
func (c *Coordinator) takeable(b int, now time.Time) bool {
	o, ok := c.observed[c.cfg.bucketLeaseName(b)]
	return !ok || o.record.HolderIdentity == "" || o.record.HolderIdentity == c.cfg.Identity || c.expired(o, now)
}

// acquire tries to take each of buckets, all at once, and calls Acquired
// for those taken.
func (c *Coordinator) acquire(ctx context.Context, buckets []int) {
	type result struct {
		record   resourcelock.LeaderElectionRecord
		sent     time.Time
		previous string
		err      error
	}
	results := make([]result, len(buckets))
	var wg sync.WaitGroup
	for i, b := range buckets {
		wg.Go(func() {
			r := &results[i]
			r.record, r.sent, r.previous, r.err = c.tryAcquire(ctx, b)
		})
	}
	wg.Wait()
	for i, b := range buckets {
		r := results[i]
		if r.err != nil {
			c.log.Debug("bucket not acquired", zap.Int("bucket", b), zap.Error(r.err))
			continue
		}
		if r.sent.IsZero() {
			continue // held by another after all
		}
		c.hold(b, r.record, r.sent, r.previous)
	}
}

// tryAcquire reads bucket b's Lease afresh and writes this replica into it
// if it is free or expired. It returns the record written and when the
// write was sent, or a zero time when the bucket is not free.
func (c *Coordinator) tryAcquire(ctx context.Context, b int) (_ resourcelock.LeaderElectionRecord, sent time.Time, previous string, _ error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RenewDeadline)
	defer cancel()
	lock := c.held[b].lock
	old, _, err := lock.Get(ctx)
	now := time.Now()
	record := resourcelock.LeaderElectionRecord{
		HolderIdentity:       c.cfg.Identity,
		LeaseDurationSeconds: c.leaseSeconds,
		AcquireTime:          metav1.NewTime(now),
		RenewTime:            metav1.NewTime(now),
	}
	if apierrors.IsNotFound(err) {
		return record, now, "", lock.Create(ctx, record)
	}
	if err != nil {
		return record, time.Time{}, "", err
	}
	c.mu.Lock()
	o := c.observe(lock.LeaseMeta.Name, *old, "", now)
	c.mu.Unlock()
	if h := old.HolderIdentity; h != "" && h != c.cfg.Identity && !c.expired(o, now) {
		return record, time.Time{}, "", nil
	}
	record.LeaderTransitions = old.LeaderTransitions
	if old.HolderIdentity != c.cfg.Identity {
		record.LeaderTransitions++
	}
	return record, now, old.HolderIdentity, lock.Update(ctx, record)
}

// hold makes bucket b held from sent, when the write of record was sent,
// and calls Acquired.
func (c *Coordinator) hold(b int, record resourcelock.LeaderElectionRecord, sent time.Time, previous string) {
	c.mu.Lock()
	h := &c.held[b]
	h.state, h.record, h.renewed = held, record, sent
	c.owns[b].Store(int64(sent.Add(c.cfg.RenewDeadline).Sub(c.epoch)))
	c.mu.Unlock()
	c.acquired.Add(1)
	c.log.Info("acquired bucket", zap.Int("bucket", b), zap.String("previousHolder", previous))
	c.handler.Acquired(b)

	// The fence is armed only now, so that Releasing never comes before
	// Acquired, even when Acquired took longer than RenewDeadline.
	c.mu.Lock()
	until := time.Until(sent.Add(c.cfg.RenewDeadline))
	if h.fence == nil {
		h.fence = time.AfterFunc(until, func() { c.fenceExpired(b) })
	} else {
		h.fence.Reset(until)
	}
	c.mu.Unlock()
}

// renew writes every bucket held or draining voluntarily, and the member
// Lease when member is true, all at once; a bucket whose Lease another
// holds now is lost at once.
func (c *Coordinator) renew(ctx context.Context, member bool) {
	type renewal struct {
		bucket int
		record resourcelock.LeaderElectionRecord
		fence  time.Time
		sent   time.Time
		ours   bool
		err    error
	}
	c.mu.Lock()
	var todo []renewal
	for b, h := range c.held {
		if h.state == held || h.state == releasing {
			todo = append(todo, renewal{bucket: b, record: h.record, fence: h.renewed.Add(c.cfg.RenewDeadline)})
		}
	}
	c.mu.Unlock()

	var wg sync.WaitGroup
	for i := range todo {
		wg.Go(func() {
			r := &todo[i]
			// A renewal that lands after the fence is of no use: the
			// bucket is stopped by then.
			ctx, cancel := context.WithDeadline(ctx, r.fence)
			defer cancel()
			r.sent = time.Now()
			r.record.RenewTime = metav1.NewTime(r.sent)
			r.ours, r.err = c.update(ctx, c.held[r.bucket].lock, &r.record)
		})
	}
	if member {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, c.cfg.RenewDeadline)
			defer cancel()
			if err := c.renewMember(ctx); err != nil {
				c.log.Debug("member Lease not renewed", zap.Error(err))
			}
		})
	}
	wg.Wait()

	for _, r := range todo {
		switch {
		case r.err != nil:
			c.log.Debug("bucket not renewed", zap.Int("bucket", r.bucket), zap.Error(r.err))
		case !r.ours:
			c.mu.Lock()
			c.lose(r.bucket, "its Lease is another's or gone", r.record.HolderIdentity)
			c.mu.Unlock()
		default:
			c.mu.Lock()
			h := &c.held[r.bucket]
			if h.state == held || h.state == releasing {
				h.record, h.renewed = r.record, r.sent
				if h.state == held {
					c.owns[r.bucket].Store(int64(r.sent.Add(c.cfg.RenewDeadline).Sub(c.epoch)))
				}
				h.fence.Reset(time.Until(r.sent.Add(c.cfg.RenewDeadline)))
			}
			c.mu.Unlock()
		}
	}
}

// update writes record to lock's Lease if this replica still holds it, and
// reports whether it did. A conflict means that this replica's copy is
// stale (a write of its own whose answer was lost) or that another replica
// took the Lease: a fresh read tells which. A Lease deleted is not held
// any more: another replica may create it. On return, record's holder is
// the Lease's when another holds it.
func (c *Coordinator) update(ctx context.Context, lock *resourcelock.LeaseLock, record *resourcelock.LeaderElectionRecord) (ours bool, _ error) {
	err := lock.Update(ctx, *record)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		record.HolderIdentity = ""
		return false, nil
	case !apierrors.IsConflict(err):
		return false, err
	}
	old, _, err := lock.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		record.HolderIdentity = ""
		return false, nil
	case err != nil:
		return false, err
	case old.HolderIdentity != c.cfg.Identity:
		record.HolderIdentity = old.HolderIdentity
		return false, nil
	}
	return true, lock.Update(ctx, *record)
}

// renewMember writes the member Lease, creating it when it is missing: at
// first, or after a replica that took this one for gone deleted it.
func (c *Coordinator) renewMember(ctx context.Context) error {
	now := metav1.NewTime(time.Now())
	record := resourcelock.LeaderElectionRecord{
		HolderIdentity:       c.cfg.Identity,
		LeaseDurationSeconds: c.leaseSeconds,
		AcquireTime:          c.joined,
		RenewTime:            now,
	}
	if c.member.Update(ctx, record) == nil {
		return nil
	}
	// The first write, or a copy gone stale: read the Lease again.
	_, _, err := c.member.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return c.member.Create(ctx, record)
	case err != nil:
		return err
	}
	return c.member.Update(ctx, record)
}

// giveUp starts to drain bucket b, held, to release it. c.mu is held.
func (c *Coordinator) giveUp(b int, reason string) {
	c.held[b].state = releasing
	c.owns[b].Store(0)
	c.released.Add(1)
	c.log.Info("releasing bucket", zap.Int("bucket", b), zap.String("reason", reason))
	c.drain(b)
}

// fenceExpired stops bucket b when RenewDeadline has passed since the start
// of its last successful renewal: past it, the others may already count
// down its LeaseDuration.
func (c *Coordinator) fenceExpired(b int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := &c.held[b]
	if time.Since(h.renewed) < c.cfg.RenewDeadline {
		return // renewed since the timer was set
	}
	c.lose(b, "not renewed within RenewDeadline", "")
}

// lose stops bucket b, held or being released, without a release: Releasing
// is called if it was held, and the bucket is no longer renewed. c.mu is
// held.
func (c *Coordinator) lose(b int, reason, holder string) {
	h := &c.held[b]
	switch h.state {
	case held:
		h.state = lost
		c.owns[b].Store(0)
		c.lost.Add(1)
		c.log.Info("lost bucket", zap.Int("bucket", b), zap.String("reason", reason), zap.String("holder", holder))
		c.drain(b)
	case releasing:
		h.state = lost
		c.log.Info("lost bucket while releasing it", zap.Int("bucket", b), zap.String("reason", reason), zap.String("holder", holder))
	}
}

// drain calls Releasing for bucket b in the background; c.drained gets b
// when it returns. c.mu is held.
//
// Its context ends when another replica may take the bucket: LeaseDuration
// after the start of its last renewal, as the others count from the moment
// they saw that renewal, which was after it started. Releasing is called
// at the latest when the fence ends, RenewDeadline after that start, which
// leaves it at least LeaseDuration − RenewDeadline.
func (c *Coordinator) drain(b int) {
	c.drains.Add(1)
	ctx, cancel := context.WithDeadline(c.base, c.held[b].renewed.Add(c.cfg.LeaseDuration))
	go func() {
		defer c.drains.Done()
		defer cancel()
		start := time.Now()
		c.handler.Releasing(ctx, b)
		if ctx.Err() != nil {
			c.log.Error("Releasing returned after its context ended; another replica may have run the bucket meanwhile",
				zap.Int("bucket", b), zap.Duration("took", time.Since(start)))
		}
		c.drained <- b
	}()
}

// release clears the holder of bucket b's Lease, and of every other bucket
// drained meanwhile, as client-go's leader election releases a Lease, so
// that another replica takes it at once; a Lease another replica holds by
// now is left alone. It is called only once Releasing has returned.
func (c *Coordinator) release(ctx context.Context, b int) {
	drained := []int{b}
	for more := true; more; {
		select {
		case b := <-c.drained:
			drained = append(drained, b)
		default:
			more = false
		}
	}
	var wg sync.WaitGroup
	for _, b := range drained {
		c.mu.Lock()
		h := &c.held[b]
		state := h.state
		now := metav1.NewTime(time.Now())
		record := resourcelock.LeaderElectionRecord{LeaderTransitions: h.record.LeaderTransitions, LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now}
		c.mu.Unlock()
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, c.cfg.RenewDeadline)
			defer cancel()
			ours, err := c.update(ctx, h.lock, &record)
			switch {
			case err != nil:
				c.log.Info("bucket drained, Lease not released; the others take it once it expires", zap.Int("bucket", b), zap.Error(err))
			case ours && state == releasing:
				c.log.Info("released bucket", zap.Int("bucket", b))
			case ours:
				c.log.Info("released lost bucket", zap.Int("bucket", b))
			default:
				c.log.Info("bucket drained; its Lease is another's or gone", zap.Int("bucket", b), zap.String("holder", record.HolderIdentity))
			}
			c.mu.Lock()
			h.state = free
			h.fence.Stop()
			c.mu.Unlock()
		})
	}
	wg.Wait()
}

// collect deletes member Leases that expired, unless they changed since:
// each replica that crashed leaves one, with an identity of its own.
func (c *Coordinator) collect(ctx context.Context, names []string) {
	for _, name := range names {
		c.mu.Lock()
		rv := c.observed[name].resourceVersion
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(ctx, c.cfg.RenewDeadline)
		err := c.client.CoordinationV1().Leases(c.cfg.Namespace).Delete(ctx, name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		cancel()
		switch {
		case err == nil:
			c.log.Info("deleted expired member Lease", zap.String("lease", name))
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			c.log.Debug("expired member Lease not deleted", zap.String("lease", name), zap.Error(err))
			continue
		}
		c.mu.Lock()
		if o, ok := c.observed[name]; ok && o.resourceVersion == rv {
			o.collected = true
			c.observed[name] = o
		}
		c.mu.Unlock()
	}
}

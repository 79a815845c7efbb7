package fxcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/contract"
)

// ErrClusterNotFound is returned for a cluster that is not engaged, or no
// longer.
var ErrClusterNotFound = errors.New("cluster not found")

// Fleet is the app's member clusters: it engages the clusters its
// providers find, gives each one its stores, and runs its controllers
// against those once they have synced. Module provides it.
//
// What a module asks of every member (For, NewController) is declared
// while the app is built. Each member that joins gets it all, in a
// registry of its own.
type Fleet struct {
	scheme *k8sruntime.Scheme
	log    *zap.Logger
	opts   Options

	// declared holds, in order, what every member is given; asked is a
	// registry that never starts, where each request is checked as it is
	// made and which describe and rbac read.
	declared []declaration
	asked    *fxstore.Registry
	// parts are what the members' stores share of their objects: the
	// same object in ten members keeps one copy of its parts.
	parts *fxstore.Parts

	// coordinator shares the members out among replicas (see share.go);
	// nil when they are not. coordinatorErr is why it could not be made.
	coordinator    *fxshard.Coordinator
	coordinatorErr error
	coordinating   sync.WaitGroup

	mu      sync.Mutex
	running bool
	stopped bool
	runCtx  context.Context
	// offers are the members the providers engaged; members are those
	// that run on this replica: all offers, unless the fleet shares them.
	offers  map[ClusterName]*offer
	members map[ClusterName]*member
	// changed is closed, and replaced, whenever a member's state changes.
	changed      chan struct{}
	providerErrs []error
	providers    sync.WaitGroup
	wg           sync.WaitGroup
	// elected is closed once member work may begin (see elected).
	elected     chan struct{}
	electedOnce sync.Once
}

// Options configures a Fleet.
type Options struct {
	// SyncTimeout bounds each attempt of a member to sync its stores.
	// Defaults to 2 minutes.
	SyncTimeout time.Duration

	// StopTimeout bounds how long a leaving member's reconciles in flight
	// run on. Defaults to 30 seconds.
	StopTimeout time.Duration

	// Backoff spaces the attempts of a member that failed to join.
	// Defaults to 1 second, doubling up to 2 minutes, with 10% jitter.
	Backoff wait.Backoff

	// Providers engage the members while the fleet runs.
	Providers []Provider

	// WaitFor names the members the app's start waits for: it fails if
	// one of them fails to join, as it does for a store that cannot sync.
	// Defaults to none: no member holds back the app's start.
	WaitFor []ClusterName

	// NewSource returns the source of a member's stores. Defaults to
	// apiserver.NewSource over the connection's client, decoding once
	// what the objects of built-in kinds repeat (apiserver.WithREST).
	NewSource func(*connection.Connection) fxstore.Source

	// Share, when set, shares the members out among the app's replicas,
	// through the Lease-fenced buckets of fxshard's group Share names.
	// A member joins only on the replica that holds its name's bucket,
	// and its controllers run there, leader or not; a bucket given up
	// makes its members leave before its Lease goes. WaitFor cannot be
	// used with it. Defaults to none: every replica engages every
	// member, and their controllers run on the leader.
	Share *fxshard.Config

	// Leases is a client of the app's own cluster, for Share's Leases.
	// Module defaults it to the app's connection.
	Leases kubernetes.Interface
}

func (o Options) withDefaults() Options {
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = 2 * time.Minute
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 30 * time.Second
	}
	if o.Backoff.Duration <= 0 {
		o.Backoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 2 * time.Minute}
	}
	if o.NewSource == nil {
		o.NewSource = func(c *connection.Connection) fxstore.Source {
			return apiserver.NewSource(c.Client, apiserver.WithREST(c.Config, c.HTTPClient))
		}
	}
	return o
}

// declaration is what every member is given: stores to ask for before its
// registry starts, and controllers to engage once it has synced.
type declaration interface {
	// declare asks for what it needs in m's registry, which has not
	// started.
	declare(m *member) error
	// forget drops what declare kept of m.
	forget(m *member)
}

// engager is a declaration with work to run against a member once it has
// synced: a controller.
type engager interface {
	declaration
	// engage starts the work for m; disengage, which engage returns,
	// stops it and returns once its work in flight is done.
	engage(m *member) (disengage func(), err error)
}

var (
	_ Aware                   = (*Fleet)(nil)
	_ manager.Runnable        = (*Fleet)(nil)
	_ contract.WarmupRunnable = (*Fleet)(nil)
)

// NewFleet returns a fleet of no clusters, whose stores hold the Go types
// of scheme. Its providers engage clusters once Start runs.
func NewFleet(scheme *k8sruntime.Scheme, log *zap.Logger, opts Options) *Fleet {
	if log == nil {
		log = zap.NewNop()
	}
	f := &Fleet{
		scheme:  scheme,
		log:     log,
		opts:    opts.withDefaults(),
		asked:   fxstore.NewRegistry(scheme, fxstore.WithCluster("*")),
		parts:   fxstore.NewParts(),
		offers:  make(map[ClusterName]*offer),
		members: make(map[ClusterName]*member),
		changed: make(chan struct{}),
		elected: make(chan struct{}),
	}
	f.coordinator, f.coordinatorErr = f.newCoordinator()
	if f.coordinatorErr == nil && f.coordinator != nil && len(f.opts.WaitFor) > 0 {
		f.coordinatorErr = errors.New("the start cannot wait for named members (--wait-for-clusters) while they are shared out among replicas (--shard-clusters): each joins on one replica only; drop one of the two")
	}
	return f
}

// declare adds d to what every member is given. Members that joined
// already do not get it: declare while the app is built.
func (f *Fleet) declare(d declaration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running {
		return errors.New("the fleet runs already; declare stores and controllers of every member in a constructor")
	}
	f.declared = append(f.declared, d)
	return nil
}

// Engage implements Aware: the cluster name joins, through cfg, until ctx
// ends.
func (f *Fleet) Engage(ctx context.Context, name ClusterName, cfg *rest.Config) error {
	if err := checkName(name); err != nil {
		return err
	}
	if cfg == nil {
		return fmt.Errorf("cluster %q: no rest config", name)
	}
	conn, err := connection.New(rest.CopyConfig(cfg), f.scheme)
	if err != nil {
		return fmt.Errorf("cluster %q: %w", name, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.running || f.stopped {
		return fmt.Errorf("cluster %q: the fleet is not running; engage clusters from a Provider", name)
	}
	o := &offer{name: name, conn: conn, bucket: f.bucketOf(name)}
	f.offers[name] = o
	context.AfterFunc(ctx, func() { f.withdraw(o) })
	if f.owns(o.bucket) {
		f.startLocked(o)
		return nil
	}
	// A member of the name engaged before is of the same bucket: it is
	// leaving, as its bucket went.
	f.log.Info("cluster is another replica's: it joins on the replica holding its bucket",
		zap.String("cluster", string(name)), zap.Int("bucket", o.bucket))
	return nil
}

// startLocked makes o's member join, once the member of the name that
// ran before, if any, has left. f.mu is held.
func (f *Fleet) startLocked(o *offer) {
	m := newMember(f, o)
	prev := f.members[o.name]
	f.members[o.name] = m
	f.wg.Go(func() {
		if prev != nil {
			prev.leave()
			<-prev.done
		}
		m.run()
		f.mu.Lock()
		if f.members[o.name] == m {
			delete(f.members, o.name)
		}
		f.mu.Unlock()
	})
}

// withdraw forgets o, whose engagement ended: its member leaves.
func (f *Fleet) withdraw(o *offer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.offers[o.name] == o {
		delete(f.offers, o.name)
	}
	if m := f.members[o.name]; m != nil && m.offer == o {
		m.leave()
	}
}

// checkName returns why name cannot name a member cluster.
func checkName(name ClusterName) error {
	if name.Empty() {
		return errors.New(`cluster name is empty; the empty name is the app's own cluster`)
	}
	if msgs := validation.IsDNS1123Subdomain(string(name)); len(msgs) > 0 {
		return fmt.Errorf("cluster name %q: %s; name clusters as Kubernetes names objects", name, strings.Join(msgs, "; "))
	}
	return nil
}

// Warmup starts the fleet's providers once the app's own stores have
// started: members join while those sync. With Options.WaitFor, it then
// waits until those members have joined, and fails if one of them fails
// to: the app's start waits for them. It implements the warm-up of
// controller-runtime's runnables, which the app's lifecycle calls.
func (f *Fleet) Warmup(ctx context.Context) error {
	if f.coordinatorErr != nil {
		return f.coordinatorErr
	}
	f.startProviders(ctx)
	return f.waitFor(ctx, f.opts.WaitFor)
}

// Start runs the fleet's providers, if Warmup has not, until ctx ends.
// Then every member leaves, and Start returns once they have: their
// controllers' work is done and their stores are stopped. It implements
// manager.Runnable: the app's lifecycle starts it once the app's own
// stores have synced, on every replica, so that a standby's members are
// warm.
func (f *Fleet) Start(ctx context.Context) error {
	if f.coordinatorErr != nil {
		return f.coordinatorErr
	}
	f.startProviders(ctx)
	<-ctx.Done()

	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	// A coordinator gives its buckets back once their members have left.
	f.coordinating.Wait()
	f.mu.Lock()
	members := slices.Collect(maps.Values(f.members))
	f.mu.Unlock()
	for _, m := range members {
		m.leave()
	}
	f.providers.Wait()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.providerErrs...)
}

// startProviders starts each provider, once, until ctx ends.
func (f *Fleet) startProviders(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running {
		return
	}
	f.running, f.runCtx = true, ctx
	f.runCoordinator(ctx)
	for _, p := range f.opts.Providers {
		f.providers.Go(func() {
			err := p.Start(ctx, f)
			if err == nil || ctx.Err() != nil {
				return
			}
			f.log.Error("cluster provider failed; the clusters it engaged stay until the app stops", zap.Error(err))
			f.mu.Lock()
			f.providerErrs = append(f.providerErrs, err)
			f.mu.Unlock()
		})
	}
}

// waitFor waits until every member of names has joined, and returns the
// error of the first that fails to.
func (f *Fleet) waitFor(ctx context.Context, names []ClusterName) error {
	for {
		f.mu.Lock()
		changed := f.changed
		var pending []string
		var errs []error
		for _, name := range names {
			m := f.members[name]
			if m == nil {
				pending = append(pending, string(name))
				continue
			}
			switch st, err := m.status(); st {
			case Ready:
			case Failed:
				errs = append(errs, err)
			default:
				pending = append(pending, string(name))
			}
		}
		f.mu.Unlock()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("member clusters the app waits for cannot join (clear --wait-for-clusters not to wait):\n%w", err)
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("member clusters %s have not joined: %w", strings.Join(pending, ", "), context.Cause(ctx))
		}
	}
}

// changedState tells waitFor that a member's state changed.
func (f *Fleet) changedState() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.changed)
	f.changed = make(chan struct{})
}

// String names the fleet in the app's messages.
func (f *Fleet) String() string { return "the fleet of member clusters" }

// NeedLeaderElection implements manager.LeaderElectionRunnable: members
// sync on every replica; their controllers run on the leader, unless the
// members are shared out among replicas.
func (f *Fleet) NeedLeaderElection() bool { return false }

// leaderOnly reports whether the members' controllers run on the leader
// alone: unless the members are shared out among replicas, where each
// runs those of its own members.
func (f *Fleet) leaderOnly() bool { return f.coordinator == nil }

// GetCluster returns the member name once it has joined (its stores have
// synced) and until it has left (its work in flight is done). It returns
// ErrClusterNotFound for a cluster that has not joined, or has left.
func (f *Fleet) GetCluster(_ context.Context, name ClusterName) (cluster.Cluster, error) {
	if m := f.member(name); m != nil && m.serving() {
		if c := m.cluster(); c != nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("cluster %q: %w", name, ErrClusterNotFound)
}

// member returns the member name, whatever its state, or nil.
func (f *Fleet) member(name ClusterName) *member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.members[name]
}

// Clusters describes the members, by name.
func (f *Fleet) Clusters() []ClusterInfo {
	f.mu.Lock()
	members := slices.Collect(maps.Values(f.members))
	f.mu.Unlock()
	infos := make([]ClusterInfo, 0, len(members))
	for _, m := range members {
		infos = append(infos, m.info())
	}
	slices.SortFunc(infos, func(a, b ClusterInfo) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return infos
}

// Stores describes the stores asked for in every member, as their keys
// name them in cluster "*".
func (f *Fleet) Stores() []fxstore.StoreInfo { return f.asked.Stores() }

// asksIn reports whether a store of key, in cluster "*", is asked for in
// the member name by a declaration.
func (f *Fleet) asksIn(key fxstore.Key, name ClusterName) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.declared {
		if m, ok := d.(Members); ok && m.Key() == key && m.asksIn(name) {
			return true
		}
	}
	return false
}

// Check connects to the cluster of cfg as the member name would join,
// without starting its stores: each store asked for in that member
// (in every member, or in it by name) is checked at its source (its kind is served, and it may be listed and
// watched). The member is Ready if every store passes, else Failed with
// every store's cause. describe --cluster checks the members its flags
// name so.
func (f *Fleet) Check(ctx context.Context, name ClusterName, cfg *rest.Config) ClusterInfo {
	info := ClusterInfo{Name: name, State: Ready, Host: cfg.Host, Since: time.Now(), Attempts: 1}
	fail := func(err error) ClusterInfo {
		info.State, info.Err = Failed, err
		return info
	}
	if err := checkName(name); err != nil {
		return fail(err)
	}
	conn, err := connection.New(rest.CopyConfig(cfg), f.scheme)
	if err != nil {
		return fail(fmt.Errorf("cluster %q: %w", name, err))
	}
	defer conn.HTTPClient.CloseIdleConnections()
	src := f.opts.NewSource(conn)
	var errs []error
	for _, s := range f.asked.Stores() {
		if !f.asksIn(s.Key, name) {
			continue // asked for in other members only (ForClusters)
		}
		key := s.Key
		key.Cluster = string(name)
		if _, err := src.Bind(ctx, key); err != nil {
			errs = append(errs, &fxstore.StoreError{Key: key, Err: err})
		}
		info.Stores = append(info.Stores, fxstore.StoreInfo{Key: key, Consumers: s.Consumers})
	}
	if err := errors.Join(errs...); err != nil {
		return fail(fmt.Errorf("cluster %q cannot join:\n%w", name, err))
	}
	return info
}

package fxcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/recorders"
	"github.com/fxkube/fxkube/storecache"
)

// State is where a member is in its life.
type State string

const (
	// Joining is a member whose stores are starting and syncing.
	Joining State = "joining"
	// Ready is a member whose stores have synced: its controllers run.
	Ready State = "ready"
	// Failed is a member whose last attempt to join failed; it tries again.
	Failed State = "failed"
	// Failing is a member that joined and whose stores' lists or watches
	// fail since: its API server is away, say. Its stores serve what they
	// held, growing stale, and its controllers go on; it is Ready again
	// once every store's list/watch works.
	Failing State = "failing"
	// Leaving is a member whose controllers finish their work; then its
	// stores stop.
	Leaving State = "leaving"
)

// ClusterInfo describes a member cluster.
type ClusterInfo struct {
	Name  ClusterName
	State State
	// Host is its API server's address.
	Host string
	// Since is when it entered State.
	Since time.Time
	// Attempts counts its attempts to join, the current one included.
	Attempts int
	// Err is why its last attempt failed, while it is Failed, or the
	// first failing store's error, while it is Failing.
	Err error
	// Stores are its stores, while it has some.
	Stores []fxstore.StoreInfo
}

// Cluster is a member cluster that has joined: its connection, its stores
// behind a controller-runtime cache and client, and its event recorders.
// It is a controller-runtime cluster.Cluster, started by the fleet.
type Cluster struct {
	*recorders.Broadcasting

	name     ClusterName
	left     <-chan struct{}
	conn     *connection.Connection
	scheme   *k8sruntime.Scheme
	registry *fxstore.Registry
	cache    crcache.Cache
	client   client.Client
}

// Name returns the cluster's name.
func (c *Cluster) Name() ClusterName { return c.name }

// Stores returns the registry of the cluster's stores: ask it for a store
// while the cluster is engaged with fxstore.Hold.
func (c *Cluster) Stores() *fxstore.Registry { return c.registry }

// GetClient returns a client that reads from the cluster's stores, with
// controller-runtime's semantics, and writes to its API server.
func (c *Cluster) GetClient() client.Client { return c.client }

// GetCache returns the cluster's stores as a controller-runtime cache.
func (c *Cluster) GetCache() crcache.Cache { return c.cache }

// GetFieldIndexer returns the cache's field indexer.
func (c *Cluster) GetFieldIndexer() client.FieldIndexer { return c.cache }

// GetAPIReader returns a client that reads from the API server directly.
func (c *Cluster) GetAPIReader() client.Reader { return c.conn.Client }

// GetConfig returns the cluster's rest config; do not change it.
func (c *Cluster) GetConfig() *rest.Config { return c.conn.Config }

// GetHTTPClient returns the HTTP client every request to the cluster
// shares.
func (c *Cluster) GetHTTPClient() *http.Client { return c.conn.HTTPClient }

// GetRESTMapper returns the cluster's REST mapper.
func (c *Cluster) GetRESTMapper() meta.RESTMapper { return c.conn.Mapper }

// Connection returns the cluster's connection.
func (c *Cluster) Connection() *connection.Connection { return c.conn }

// GetScheme returns the app's scheme.
func (c *Cluster) GetScheme() *k8sruntime.Scheme { return c.scheme }

// Start returns once ctx ends or the cluster has left: the fleet starts
// and stops a member, not its users.
func (c *Cluster) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-c.left:
	}
	return nil
}

var _ cluster.Cluster = (*Cluster)(nil)

// member is one engagement of a cluster: from Engage until it has left.
type member struct {
	fleet *Fleet
	offer *offer
	name  ClusterName
	conn  *connection.Connection
	log   *zap.Logger
	// ctx ends once the member is to leave; done is closed once it has.
	ctx   context.Context
	leave context.CancelFunc
	done  chan struct{}
	// hardStop ends the reconciles still in flight once the stop timeout
	// has passed after the member began to leave.
	hardStop context.Context
	endHard  context.CancelCauseFunc

	mu       sync.Mutex
	st       State
	since    time.Time
	err      error
	attempts int
	joined   *Cluster // this attempt's, once its registry exists
	inflight sync.WaitGroup
}

func newMember(f *Fleet, o *offer) *member {
	ctx, leave := context.WithCancel(f.runCtx)
	hardStop, endHard := context.WithCancelCause(context.WithoutCancel(f.runCtx))
	return &member{
		fleet: f, offer: o, name: o.name, conn: o.conn,
		log: f.log.With(zap.String("cluster", string(o.name))),
		ctx: ctx, leave: leave, done: make(chan struct{}),
		hardStop: hardStop, endHard: endHard,
		st: Joining, since: time.Now(),
	}
}

// run joins the cluster, trying again after each failure, then runs its
// controllers until it is to leave, and leaves.
func (m *member) run() {
	defer close(m.done)
	// client-go shares transports between equal configs: close only the
	// connections no one uses, so that the member leaves none open.
	defer m.conn.HTTPClient.CloseIdleConnections()
	defer m.endHard(errLeft)
	backoff := m.fleet.opts.Backoff
	var lastCause string
	for {
		err := m.join()
		if err == nil {
			break
		}
		if m.ctx.Err() != nil {
			m.log.Info("cluster left before it joined")
			return
		}
		delay := backoff.Step()
		m.setState(Failed, err)
		// A cause said once is not said at every attempt.
		if cause := err.Error(); cause != lastCause {
			lastCause = cause
			m.log.Error("cluster cannot join; trying again with backoff", zap.Error(err), zap.Duration("retryIn", delay))
		} else {
			m.log.Debug("cluster still cannot join", zap.Error(err), zap.Duration("retryIn", delay))
		}
		select {
		case <-time.After(delay):
		case <-m.ctx.Done():
			m.log.Info("cluster left before it joined")
			return
		}
	}
	disengage := m.engage()
	<-m.ctx.Done()

	began := time.Now()
	m.setState(Leaving, nil)
	for _, d := range disengage {
		d()
	}
	m.finishInflight()
	m.mu.Lock()
	c := m.joined
	m.joined = nil
	m.mu.Unlock()
	c.Broadcasting.Stop()
	c.registry.Stop()
	m.forget()
	m.log.Info("cluster left", zap.Duration("took", time.Since(began)))
}

// join makes one attempt: it starts the member's stores and waits for
// them to sync, bounded by the sync timeout.
func (m *member) join() (err error) {
	m.mu.Lock()
	m.attempts++
	m.mu.Unlock()
	m.setState(Joining, nil)
	began := time.Now()
	c, err := m.newCluster()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			c.registry.Stop()
			m.forget()
			m.mu.Lock()
			m.joined = nil
			m.mu.Unlock()
		}
	}()
	for _, d := range m.fleet.declared {
		if err := d.declare(m); err != nil {
			return err
		}
	}
	if err := c.registry.Start(m.ctx, m.fleet.opts.NewSource(m.conn)); err != nil {
		return fmt.Errorf("start stores of cluster %q:\n%w", m.name, err)
	}
	syncCtx, cancel := context.WithTimeout(m.ctx, m.fleet.opts.SyncTimeout)
	defer cancel()
	if err := m.warmUp(syncCtx); err != nil {
		return err
	}
	if err := c.registry.WaitForSync(syncCtx); err != nil {
		if m.ctx.Err() == nil && syncCtx.Err() != nil {
			return fmt.Errorf("stores of cluster %q did not sync within the sync timeout of %s:\n%w", m.name, m.fleet.opts.SyncTimeout, err)
		}
		return fmt.Errorf("sync stores of cluster %q:\n%w", m.name, err)
	}
	c.Broadcasting.Start()
	m.setState(Ready, nil)
	m.log.Info("cluster joined", zap.String("host", m.conn.Config.Host),
		zap.Int("stores", len(c.registry.Stores())), zap.Duration("took", time.Since(began)))
	return nil
}

// newCluster makes this attempt's registry, cache and client.
func (m *member) newCluster() (*Cluster, error) {
	f := m.fleet
	r := fxstore.NewRegistry(f.scheme, fxstore.WithCluster(string(m.name)), fxstore.WithLogger(m.log.Named("fxstore")), fxstore.WithParts(f.parts))
	cache, err := storecache.New(r, m.conn.Mapper, crcache.Options{}, storecache.WithConsumer("fxcluster"), storecache.WithLateSyncTimeout(f.opts.SyncTimeout))
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", m.name, err)
	}
	cl, err := m.conn.NewClient(m.conn.Config, client.Options{
		HTTPClient: m.conn.HTTPClient, Scheme: f.scheme, Mapper: m.conn.Mapper,
		Cache: &client.CacheOptions{Reader: cache},
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %q: client: %w", m.name, err)
	}
	rec, err := recorders.New(m.conn, f.scheme, zapr.NewLogger(m.log.Named("events")))
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", m.name, err)
	}
	c := &Cluster{Broadcasting: rec, name: m.name, left: m.done, conn: m.conn, scheme: f.scheme, registry: r, cache: cache, client: cl}
	m.mu.Lock()
	m.joined = c
	m.mu.Unlock()
	return c, nil
}

// engage starts every controller's work for the member, which has joined.
func (m *member) engage() []func() {
	var disengage []func()
	for _, d := range m.fleet.declared {
		e, ok := d.(engager)
		if !ok {
			continue
		}
		stop, err := e.engage(m)
		if err != nil {
			m.log.Error("controller not engaged with the cluster", zap.Error(err))
			continue
		}
		disengage = append(disengage, stop)
	}
	return disengage
}

// warmUp runs the warm-ups of the work set up in the member, at once,
// while its stores sync.
func (m *member) warmUp(syncCtx context.Context) error {
	var works []*memberWork
	for _, d := range m.fleet.declared {
		if w, ok := d.(*memberWork); ok {
			works = append(works, w)
		}
	}
	errs := make([]error, len(works))
	var wg sync.WaitGroup
	for i, w := range works {
		wg.Go(func() { errs[i] = w.warmUp(syncCtx, m) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// forget drops what the declarations kept of the member's stores.
func (m *member) forget() {
	for _, d := range m.fleet.declared {
		d.forget(m)
	}
}

// acquire counts a reconcile in flight for the member, if it is ready, and
// returns the function that ends it.
func (m *member) acquire() (release func(), ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st != Ready {
		return nil, false
	}
	m.inflight.Add(1)
	return m.inflight.Done, true
}

// finishInflight waits for the member's reconciles in flight, for up to
// the stop timeout, then ends their contexts and waits for them to
// return.
func (m *member) finishInflight() {
	finished := make(chan struct{})
	go func() {
		m.inflight.Wait()
		close(finished)
	}()
	timer := time.NewTimer(m.fleet.opts.StopTimeout)
	defer timer.Stop()
	select {
	case <-finished:
		return
	case <-timer.C:
	}
	m.log.Warn("reconciles still in flight after the stop timeout; ending their contexts", zap.Duration("stopTimeout", m.fleet.opts.StopTimeout))
	m.endHard(errLeft)
	<-finished
}

func (m *member) setState(st State, err error) {
	m.mu.Lock()
	if m.st != st {
		m.since = time.Now()
	}
	m.st, m.err = st, err
	m.mu.Unlock()
	m.fleet.changedState()
}

// status returns the member's state, and why it failed if it has.
func (m *member) status() (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st, m.err
}

func (m *member) state() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

// serving reports whether the member's stores serve: it has joined, and
// has not yet stopped them.
func (m *member) serving() bool {
	switch m.state() {
	case Ready, Leaving:
		return true
	}
	return false
}

// cluster returns the member's cluster, while it has one.
func (m *member) cluster() *Cluster {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.joined
}

func (m *member) info() ClusterInfo {
	m.mu.Lock()
	info := ClusterInfo{Name: m.name, State: m.st, Host: m.conn.Config.Host, Since: m.since, Attempts: m.attempts, Err: m.err}
	c := m.joined
	m.mu.Unlock()
	if c != nil {
		info.Stores = c.registry.Stores()
	}
	if info.State == Ready {
		failing(&info)
	}
	return info
}

// failing makes info, of a Ready member, Failing if one of its stores
// fails: since the first began to, with that store's error.
func failing(info *ClusterInfo) {
	var first *fxstore.StoreInfo
	for i, s := range info.Stores {
		if since := s.Status.FailingSince; !since.IsZero() && (first == nil || since.Before(first.Status.FailingSince)) {
			first = &info.Stores[i]
		}
	}
	if first == nil {
		return
	}
	info.State, info.Since, info.Err = Failing, first.Status.FailingSince, first.Err()
}

// errLeft is the cause of a reconcile's context ended as its cluster left.
var errLeft = errors.New("the cluster left")

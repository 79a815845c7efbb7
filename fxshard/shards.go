package fxshard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxstore"
)

// Shards is one replica's part in a sharded app: its Coordinator, and the
// sharded stores and controllers it hands the buckets it acquires and gives
// up. A bucket acquired gets a store in each sharded store; a bucket given
// up is first drained from each sharded controller (no reconcile of its
// keys starts, and those running finish), then its stores are dropped.
type Shards struct {
	registry    *fxstore.Registry
	coordinator *Coordinator
	log         *zap.Logger
	// err is why Module could not make the Coordinator; For returns it.
	err error
	// namespaceErr is why the Leases have no namespace; the app's start
	// fails with it.
	namespaceErr error

	mu     sync.Mutex
	stores []sharded
	gates  []*gate
	// runCtx is Run's context once it runs, for checking the kinds of
	// sharded stores added later; checked holds the kinds checked.
	runCtx  context.Context
	checked map[schema.GroupKind]bool
}

// sharded is a Store of any type, as Shards hands it buckets.
type sharded interface {
	fmt.Stringer
	Key() fxstore.Key
	HasSynced() bool
	ShardKey() string
	acquire(bucket int, shard sharding.Selector) error
	release(bucket int) error
}

// NewShards returns the Shards of a replica, whose Coordinator takes
// buckets through client's Leases as cfg says, for the sharded stores of
// registry. Run runs it.
func NewShards(registry *fxstore.Registry, client kubernetes.Interface, cfg Config) (*Shards, error) {
	s := &Shards{registry: registry, checked: make(map[schema.GroupKind]bool)}
	c, err := New(client, HandlerFuncs{AcquiredFunc: s.acquired, ReleasingFunc: s.releasing}, cfg)
	if err != nil {
		return nil, err
	}
	s.coordinator, s.log = c, c.log
	return s, nil
}

// Info describes a replica's sharding.
type Info struct {
	// Group is the Leases' namespace and name, "namespace/name"; Buckets
	// how many there are; Owned those this replica holds now. Namespace
	// is the Leases' namespace, "" when it is not known (outside a
	// cluster, without --shard-namespace).
	Group     string
	Namespace string
	Buckets   int
	Owned     []int
	// Stores are the sharded stores, by the keys of their whole specs.
	Stores []StoreInfo
	// Err is why the replica cannot shard, when it cannot.
	Err error
}

// StoreInfo describes a sharded store.
type StoreInfo struct {
	Key      fxstore.Key
	ShardKey string
	// Synced reports whether the store of every bucket held has synced.
	Synced bool
}

// Info describes the replica's sharding.
func (s *Shards) Info() Info {
	var info Info
	if c := s.coordinator; c != nil {
		info.Namespace = s.namespace()
		info.Group, info.Buckets, info.Owned = info.Namespace+"/"+c.cfg.Name, c.Buckets().Len(), c.Owned()
	}
	info.Err = errors.Join(s.err, s.namespaceErr)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.stores {
		info.Stores = append(info.Stores, StoreInfo{Key: st.Key(), ShardKey: st.ShardKey(), Synced: st.HasSynced()})
	}
	return info
}

// namespace returns the namespace of the group's Leases; "" when it is
// not known.
func (s *Shards) namespace() string {
	if s.coordinator == nil || s.namespaceErr != nil {
		return ""
	}
	return s.coordinator.cfg.Namespace
}

// Coordinator returns the replica's Coordinator.
func (s *Shards) Coordinator() *Coordinator { return s.coordinator }

// Run takes part in the group until ctx ends, then gives every bucket
// back; see Coordinator.Run. Before it takes a bucket, it asks whether the
// API server applies shard selectors to each sharded store's kind: where
// it does not, each bucket's store is a view of one store of the whole
// spec, which receives every object once (see checkShardSelectors), rather
// than each bucket's store receiving every object. The registry must have started.
func (s *Shards) Run(ctx context.Context) error {
	s.mu.Lock()
	s.runCtx = ctx
	stores := slices.Clone(s.stores)
	s.mu.Unlock()
	for _, st := range stores {
		s.checkShardSelectors(ctx, st.Key())
	}
	return s.coordinator.Run(ctx)
}

// shardCheckTimeout bounds checkShardSelectors' request: past it, the
// buckets' stores are taken as if the API server applied shard selectors.
const shardCheckTimeout = 10 * time.Second

// checkShardSelectors asks, once per kind, whether the API server applies
// shard selectors to the objects of key's kind, for the buckets' stores
// asked for afterwards. Without an
// answer, each bucket's store drops what arrives outside its bucket.
func (s *Shards) checkShardSelectors(ctx context.Context, key fxstore.Key) {
	gk := key.Kind.GroupKind()
	s.mu.Lock()
	done := s.checked[gk]
	s.mu.Unlock()
	if done {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, shardCheckTimeout)
	defer cancel()
	if _, err := storeHooks.CheckShardSelectors(ctx, s.registry, key); err != nil {
		s.log.Warn("cannot tell whether the API server applies shard selectors; each bucket's store drops what arrives outside its bucket",
			zap.Stringer("store", key), zap.Error(err))
		return
	}
	s.mu.Lock()
	s.checked[gk] = true
	s.mu.Unlock()
}

func (s *Shards) add(st sharded) error {
	if s.err != nil {
		return fmt.Errorf("%s: %w", st, s.err)
	}
	s.mu.Lock()
	running := s.runCtx
	s.mu.Unlock()
	if running != nil {
		s.checkShardSelectors(running, st.Key()) // before it takes the buckets held
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	owned := s.coordinator.Owned()
	for i, b := range owned {
		if err := s.acquireIn(st, b); err != nil {
			// A store For refuses holds no bucket, and gets none later.
			for _, held := range owned[:i] {
				err = errors.Join(err, st.release(held))
			}
			return err
		}
	}
	s.stores = append(s.stores, st)
	return nil
}

// acquireIn gives st the store of bucket. s.mu is held.
func (s *Shards) acquireIn(st sharded, bucket int) error {
	shard, err := s.coordinator.Buckets().Selector(st.ShardKey(), []int{bucket})
	if err != nil {
		return err
	}
	return st.acquire(bucket, shard)
}

// consumer names a bucket's store's consumer, for describe and metrics.
func (s *Shards) consumer(bucket int) string {
	return fmt.Sprintf("fxshard bucket %d", bucket)
}

// acquired is the Coordinator's Handler.Acquired: every sharded store asks for the bucket's
// store, and every sharded controller may reconcile its keys once that
// has synced.
func (s *Shards) acquired(bucket int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gates {
		g.open(bucket)
	}
	for _, st := range s.stores {
		if err := s.acquireIn(st, bucket); err != nil {
			s.log.Error("bucket acquired, but its store cannot start", zap.Int("bucket", bucket), zap.Error(err))
		}
	}
}

// releasing is the Coordinator's Handler.Releasing: every sharded controller drains the
// bucket, then every sharded store drops its store.
func (s *Shards) releasing(ctx context.Context, bucket int) {
	s.mu.Lock()
	gates, stores := append([]*gate(nil), s.gates...), append([]sharded(nil), s.stores...)
	s.mu.Unlock()
	for _, g := range gates {
		g.drain(ctx, bucket)
	}
	for _, st := range stores {
		if err := st.release(bucket); err != nil {
			s.log.Error("bucket given up, but its store did not stop cleanly", zap.Int("bucket", bucket), zap.Error(err))
		}
	}
}

// requeueUnsynced is how soon a request for a bucket whose store has not
// synced yet is tried again.
const requeueUnsynced = 200 * time.Millisecond

// gate lets a sharded controller reconcile only the keys of the buckets
// this replica holds, and counts the reconciles in flight by bucket so
// that giving a bucket up can wait for them.
type gate struct {
	shards *Shards
	r      reconcile.Reconciler
	// bucketOf returns the bucket of a request's object; ok is false when
	// the object is in no bucket held, err when that cannot be told yet.
	bucketOf func(reconcile.Request) (bucket int, ok bool, err error)
	synced   func(bucket int) bool

	mu       sync.Mutex
	inflight map[int]*bucketWork
}

// bucketWork is a bucket's reconciles in flight; idle is closed when there
// are none and the bucket is draining.
type bucketWork struct {
	open    bool
	running int
	idle    chan struct{}
}

// Reconcile implements reconcile.Reconciler.
func (g *gate) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	bucket, ok, err := g.bucketOf(req)
	switch {
	case err != nil:
		return reconcile.Result{RequeueAfter: requeueUnsynced}, nil
	case !ok:
		return reconcile.Result{}, nil // another replica's
	}
	if !g.enter(bucket) {
		return reconcile.Result{}, nil // given up, or going
	}
	defer g.exit(bucket)
	if !g.synced(bucket) {
		return reconcile.Result{RequeueAfter: requeueUnsynced}, nil
	}
	return g.r.Reconcile(ctx, req)
}

func (g *gate) enter(bucket int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.inflight[bucket]
	if w == nil || !w.open || !g.shards.coordinator.Owns(bucket) {
		return false
	}
	w.running++
	return true
}

func (g *gate) exit(bucket int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.inflight[bucket]
	if w.running--; w.running == 0 && !w.open && w.idle != nil {
		close(w.idle)
		w.idle = nil
	}
}

// open lets reconciles of bucket's keys start.
func (g *gate) open(bucket int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.inflight[bucket]; w != nil {
		w.open = true
		return
	}
	g.inflight[bucket] = &bucketWork{open: true}
}

// drain stops reconciles of bucket's keys from starting and waits until
// those running have finished, or ctx ends.
func (g *gate) drain(ctx context.Context, bucket int) {
	g.mu.Lock()
	w := g.inflight[bucket]
	if w == nil {
		g.mu.Unlock()
		return
	}
	w.open = false
	if w.running == 0 {
		g.mu.Unlock()
		return
	}
	if w.idle == nil {
		w.idle = make(chan struct{})
	}
	idle := w.idle
	g.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
		g.shards.log.Warn("bucket given up with reconciles still running", zap.Int("bucket", bucket), zap.Error(context.Cause(ctx)))
	}
}

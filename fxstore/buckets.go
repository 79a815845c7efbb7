package fxstore

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/client-go/tools/cache"

	"github.com/fxkube/fxkube/internal/informers"
	"github.com/fxkube/fxkube/internal/primary"
	"github.com/fxkube/fxkube/internal/storehooks"
)

// buckets backs a sharded store with the stores of the buckets it holds:
// each a store of the registry whose spec has its bucket's shard. It has
// no informer and no watch of its own, and the registry does not hold it.
// fxshard adds and removes buckets as the replica takes and gives them up
// (see storehooks.Buckets). The store has synced while every bucket held
// has.
type buckets struct {
	*informers.Union[int]
	indexerReader
	e *entry // the sharded store
	// guessed names the store's objects in errors.
	guessed schema.GroupResource

	// typ, spec and req ask for a bucket's store, with the bucket's shard
	// and the consumer that consumer names.
	typ      reflect.Type
	spec     Spec
	req      request
	consumer func(bucket int) string

	// mu serialises adding and removing buckets, and guards releases,
	// which give back each bucket's store.
	mu       sync.Mutex
	releases map[int]func()
	// held are the buckets' stores; a map never changed once stored, so
	// that reads take no lock.
	held atomic.Pointer[map[int]*entry]
	// syncMu serialises turning the store's synced on and off.
	syncMu sync.Mutex
	// healthMu guards failing, the health the store's handlers last
	// heard, and hearing, each bucket's subscription to its health.
	healthMu sync.Mutex
	failing  bool
	hearing  map[int]*Subscription
}

// healthFunc is a HealthHandler of a function.
type healthFunc func(error)

func (f healthFunc) OnHealth(err error) { f(err) }

var (
	_ backing            = (*buckets)(nil)
	_ storehooks.Buckets = (*buckets)(nil)
)

// sharded is storehooks.Hooks.Sharded: the option makes For bind the
// store to the buckets returned.
func sharded(consumer func(bucket int) string) (Option, storehooks.Buckets) {
	b := &buckets{consumer: consumer, releases: make(map[int]func())}
	b.held.Store(&map[int]*entry{})
	return newOption(func(r *request) { r.buckets = b }, "fxshard.For"), b
}

// bind makes the store of key, whose requests are for typ objects matching
// spec, with no bucket yet.
func (b *buckets) bind(r *Registry, typ reflect.Type, key Key, spec Spec, req request) (*entry, error) {
	if b.e != nil {
		return nil, errors.New("a sharded store's option was given to For twice")
	}
	e := newStoreEntry(key, r)
	// The union has no source to resolve its resource: NotFound errors
	// name a guess.
	plural, _ := meta.UnsafeGuessKindToResource(key.Kind)
	b.guessed = plural.GroupResource()
	req.buckets = nil
	b.e, b.typ, b.spec, b.req = e, typ, spec, req
	b.Union = informers.NewUnion[int]("sharded store " + key.String())
	b.indexerReader = indexerReader{b.GetIndexer()}
	e.backed.Store(&backingRef{b})
	b.update() // no bucket: synced
	return e, nil
}

func (b *buckets) informer() cache.SharedIndexInformer { return b.Union }

// add fails: fxshard.For asks for a sharded store once, with its options
// and indexes, and the registry does not hold it for others to ask.
func (b *buckets) add(request, []index) error {
	return fmt.Errorf("sharded store %s takes its options and indexes from fxshard.For, once", b.e.key)
}

func (b *buckets) resource() schema.GroupResource { return b.guessed }

func (*buckets) describe(*StoreInfo) {}

// close does nothing: the registry does not hold the store.
func (*buckets) close() {}

// heapBytes is 0: the objects are the buckets' stores', which count them.
func (*buckets) heapBytes(int) int64 { return 0 }

// Acquire implements storehooks.Buckets.
func (b *buckets) Acquire(bucket int, shard sharding.Selector) error {
	spec, req := b.spec, b.req
	spec.Shard = shard
	req.consumer, req.named = b.consumer(bucket), true
	m, release, err := b.e.registry.hold(b.typ, spec, req)
	if err != nil {
		return fmt.Errorf("sharded store %s: bucket %d: %w", b.e.key, bucket, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releases[bucket] = release
	prev := *b.held.Load()
	next := maps.Clone(prev)
	next[bucket] = m
	b.held.Store(&next)
	b.update()
	// The union's reads see the bucket before its objects reach the
	// handlers: a bucket's store that is a view of a synced one replays
	// them at once, and a controller reads each to tell its bucket.
	if err := b.Add(bucket, m.proxy); err != nil {
		b.held.Store(&prev)
		b.update()
		delete(b.releases, bucket)
		release()
		return fmt.Errorf("sharded store %s: bucket %d: %w", b.e.key, bucket, err)
	}
	m.whenSynced(b.update)
	b.hear(bucket, m)
	return nil
}

// hear subscribes to the health of bucket's store m.
func (b *buckets) hear(bucket int, m *entry) {
	sub := &Subscription{e: m}
	m.mu.Lock()
	if m.healthHandlers == nil {
		m.healthHandlers = make(map[*Subscription]HealthHandler)
	}
	m.healthHandlers[sub] = healthFunc(func(error) { b.healthChanged() })
	m.mu.Unlock()
	b.healthMu.Lock()
	if b.hearing == nil {
		b.hearing = make(map[int]*Subscription)
	}
	b.hearing[bucket] = sub
	b.healthMu.Unlock()
	// It may have failed already.
	b.healthChanged()
}

// health is the store's: failing since its first bucket failed, with that
// bucket's error, while one does.
func (b *buckets) health() (since time.Time, err error) {
	for _, m := range *b.held.Load() {
		if s, e := m.health(); !s.IsZero() && (since.IsZero() || s.Before(since)) {
			since, err = s, &StoreError{Key: m.key, Err: e}
		}
	}
	return since, err
}

// healthChanged tells the store's handlers once it begins to fail, and once
// it works again: not of each bucket's transitions.
func (b *buckets) healthChanged() {
	since, _ := b.health()
	b.healthMu.Lock()
	changed := b.failing != !since.IsZero()
	b.failing = !since.IsZero()
	b.healthMu.Unlock()
	if changed {
		b.e.notifyHealth()
	}
}

// Release implements storehooks.Buckets.
func (b *buckets) Release(bucket int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, ok := (*b.held.Load())[bucket]
	if !ok {
		return nil
	}
	next := maps.Clone(*b.held.Load())
	delete(next, bucket)
	b.held.Store(&next)
	b.update()
	b.healthMu.Lock()
	sub := b.hearing[bucket]
	delete(b.hearing, bucket)
	b.healthMu.Unlock()
	m.mu.Lock()
	delete(m.healthHandlers, sub)
	m.mu.Unlock()
	// A failing bucket given up may leave the store working.
	b.healthChanged()
	err := b.Remove(bucket)
	b.releases[bucket]()
	delete(b.releases, bucket)
	return err
}

// SetGate implements storehooks.Buckets.
func (b *buckets) SetGate(g primary.Gated) { b.e.gate = g }

// Held implements storehooks.Buckets.
func (b *buckets) Held() []int { return slices.Sorted(maps.Keys(*b.held.Load())) }

// Synced implements storehooks.Buckets.
func (b *buckets) Synced(bucket int) (held, synced bool) {
	m, ok := (*b.held.Load())[bucket]
	return ok, ok && m.synced.Load()
}

// update turns the store's synced on once every bucket held has synced,
// and off while one has not.
func (b *buckets) update() {
	b.syncMu.Lock()
	defer b.syncMu.Unlock()
	all := true
	for _, m := range *b.held.Load() {
		all = all && m.synced.Load()
	}
	e := b.e
	switch {
	case all && !e.synced.Load():
		e.synced.Store(true)
		close(e.syncedDone())
	case !all && e.synced.Load():
		// WaitForSync waits on the new channel before reads fail.
		e.syncedCh.Store(new(make(chan struct{})))
		e.synced.Store(false)
	}
}

// getSynced finds key in a bucket that has synced.
func (b *buckets) getSynced(key string) (any, bool) {
	for _, m := range *b.held.Load() {
		if !m.synced.Load() {
			continue
		}
		if item, ok := m.backing().get(key); ok {
			return item, true
		}
	}
	return nil, false
}

// count is the sum of the buckets' counts.
func (b *buckets) count() int {
	n := 0
	for _, m := range *b.held.Load() {
		n += m.backing().count()
	}
	return n
}

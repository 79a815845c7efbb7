package fxcluster

import (
	"errors"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/caller"
)

// Stores is a store of T objects in every member cluster, or in the
// members ForClusters names: one spec, asked for in each such member's
// registry as it joins.
type Stores[T client.Object] struct {
	fleet *Fleet
	// names are the members asked, or nil for every member.
	names    map[ClusterName]bool
	spec     fxstore.Spec
	opts     []fxstore.Option
	consumer string
	key      fxstore.Key // in cluster "*"

	mu      sync.Mutex
	members map[*member]*fxstore.Store[T]
}

// For asks for the store of T objects matching spec in every member
// cluster, as fxstore.For does in the app's own cluster. Each member that
// joins asks for it before its stores start, so the member's controllers
// see it synced. For does no I/O; a bad spec fails here, as fxstore.For's
// does. Call it while the app is built, in a constructor.
func For[T client.Object](f *Fleet, spec fxstore.Spec, opts ...fxstore.Option) (*Stores[T], error) {
	return forMembers[T](f, nil, spec, opts)
}

// ForClusters asks for the store of T objects matching spec in the member
// clusters names only, as For does in every member. A controller whose
// primary store it is runs in those members only.
func ForClusters[T client.Object](f *Fleet, names []ClusterName, spec fxstore.Spec, opts ...fxstore.Option) (*Stores[T], error) {
	if len(names) == 0 {
		return nil, errors.New("store in named member clusters: no name given; ask with fxcluster.For for a store in every member")
	}
	set := make(map[ClusterName]bool, len(names))
	for _, name := range names {
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("store in named member clusters: %w", err)
		}
		set[name] = true
	}
	return forMembers[T](f, set, spec, opts)
}

func forMembers[T client.Object](f *Fleet, names map[ClusterName]bool, spec fxstore.Spec, opts []fxstore.Option) (*Stores[T], error) {
	consumer := caller.Name(2)
	opts = append([]fxstore.Option{fxstore.WithConsumer(consumer)}, opts...)
	asked, err := fxstore.For[T](f.asked, spec, opts...)
	if err != nil {
		return nil, fmt.Errorf("store in every member cluster: %w", err)
	}
	s := &Stores[T]{fleet: f, names: names, spec: spec, opts: opts, consumer: consumer, key: asked.Key(), members: make(map[*member]*fxstore.Store[T])}
	if err := f.declare(s); err != nil {
		return nil, fmt.Errorf("store %s requested by %s: %w", s.key, consumer, err)
	}
	return s, nil
}

// Key returns the store's key in cluster "*": every member's has the
// member's name instead.
func (s *Stores[T]) Key() fxstore.Key { return s.key }

// String describes the stores.
func (s *Stores[T]) String() string { return s.key.String() }

// In returns the store in the member name, from when the member has
// joined until it has left. It returns ErrClusterNotFound otherwise.
func (s *Stores[T]) In(name ClusterName) (*fxstore.Store[T], error) {
	m := s.fleet.member(name)
	if m == nil || !m.serving() {
		return nil, fmt.Errorf("store %s in cluster %q: %w", s.key, name, ErrClusterNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.members[m]
	if !ok {
		return nil, fmt.Errorf("store %s in cluster %q: %w", s.key, name, ErrClusterNotFound)
	}
	return st, nil
}

// asksIn reports whether the store is asked for in the member name.
func (s *Stores[T]) asksIn(name ClusterName) bool { return s.names == nil || s.names[name] }

func (s *Stores[T]) declare(m *member) error {
	if !s.asksIn(m.name) {
		return nil
	}
	st, err := fxstore.For[T](m.cluster().registry, s.spec, s.opts...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.members[m] = st
	s.mu.Unlock()
	return nil
}

func (s *Stores[T]) forget(m *member) {
	s.mu.Lock()
	delete(s.members, m)
	s.mu.Unlock()
}

// in returns the store in m, which has joined.
func (s *Stores[T]) in(m *member) (Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.members[m]
	if !ok {
		return nil, fmt.Errorf("store %s not asked for in cluster %q", s.key, m.name)
	}
	return st, nil
}

func (s *Stores[T]) fleetOf() *Fleet { return s.fleet }

// Members is a store in every member cluster, such as a *Stores: what a
// controller across clusters reconciles or watches.
type Members interface {
	Key() fxstore.Key
	fleetOf() *Fleet
	asksIn(name ClusterName) bool
	in(m *member) (Store, error)
}

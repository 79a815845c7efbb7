package testenv

import (
	"fmt"
	"maps"
	"sync"

	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Mirror is an event handler that keeps what its events said: each
// object's key ("namespace/name") with its resourceVersion. It records as
// a problem every event no watch of the store's own would send: an Update
// whose resourceVersion did not change, an Add of an object held, a
// Delete of one not held, and an Add right after a Delete of the same
// version (a Delete and Add of an unchanged object).
type Mirror struct {
	mu       sync.Mutex
	held     map[string]string
	deleted  map[string]string // the version each key was deleted at, until its next event
	problems []string
	events   int
}

var _ cache.ResourceEventHandler = (*Mirror)(nil)

// NewMirror returns an empty mirror.
func NewMirror() *Mirror {
	return &Mirror{held: make(map[string]string), deleted: make(map[string]string)}
}

func mirrorKey(obj any) (string, string) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o := obj.(client.Object)
	return client.ObjectKeyFromObject(o).String(), o.GetResourceVersion()
}

// OnAdd implements cache.ResourceEventHandler.
func (m *Mirror) OnAdd(obj any, _ bool) {
	k, rv := mirrorKey(obj)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events++
	if was, ok := m.held[k]; ok {
		m.problems = append(m.problems, fmt.Sprintf("Add of %s@%s, held at %s", k, rv, was))
	}
	if was, ok := m.deleted[k]; ok && was == rv {
		m.problems = append(m.problems, fmt.Sprintf("Delete and Add of %s@%s, unchanged", k, rv))
	}
	delete(m.deleted, k)
	m.held[k] = rv
}

// OnUpdate implements cache.ResourceEventHandler.
func (m *Mirror) OnUpdate(oldObj, newObj any) {
	k, rv := mirrorKey(newObj)
	_, oldRV := mirrorKey(oldObj)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events++
	was, ok := m.held[k]
	switch {
	case !ok:
		m.problems = append(m.problems, fmt.Sprintf("Update of %s@%s, not held", k, rv))
	case rv == was || rv == oldRV:
		m.problems = append(m.problems, fmt.Sprintf("Update of %s@%s, unchanged", k, rv))
	}
	m.held[k] = rv
}

// OnDelete implements cache.ResourceEventHandler.
func (m *Mirror) OnDelete(obj any) {
	k, _ := mirrorKey(obj)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events++
	was, ok := m.held[k]
	if !ok {
		m.problems = append(m.problems, fmt.Sprintf("Delete of %s, not held", k))
	}
	delete(m.held, k)
	m.deleted[k] = was
}

// Held returns what the events said: each key with its resourceVersion.
func (m *Mirror) Held() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.held)
}

// Problems returns the events no watch of the store's own would send.
func (m *Mirror) Problems() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.problems...)
}

// Events returns how many events the mirror had.
func (m *Mirror) Events() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events
}

// Versions returns each object's key with its resourceVersion, as Held
// does, for objs.
func Versions[T client.Object](objs []T) map[string]string {
	out := make(map[string]string, len(objs))
	for _, o := range objs {
		out[client.ObjectKeyFromObject(o).String()] = o.GetResourceVersion()
	}
	return out
}

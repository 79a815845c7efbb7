package fxstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
)

// mutationDetector keeps a deep copy of every object the registry's stores
// take, to tell later whether code changed one in place. Objects read from
// stores are shared by every reader, so such a change reaches them all.
// client-go's cache mutation detector is the model. The test kits turn it
// on (fxstoretest, fxcontrollertest); production does not, as it would
// hold every object twice.
type mutationDetector struct {
	mu sync.Mutex
	// taken maps each object a store took to its store and its copy. An
	// object replaced by a newer version stays: no one may change it
	// either.
	taken map[k8sruntime.Object]takenObject
}

type takenObject struct {
	store Key
	copy  k8sruntime.Object
}

// detectMutations turns r's detector on, for the stores r starts from now
// on. It returns the check to run once code has read from the stores.
func (r *Registry) detectMutations() (check func() error, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := r.detector.Load(); d != nil {
		return d.check, nil
	}
	if r.started {
		return nil, errors.New("fxstore: detect mutations before the registry starts")
	}
	d := &mutationDetector{taken: make(map[k8sruntime.Object]takenObject)}
	r.detector.Store(d)
	return d.check, nil
}

// take keeps a copy of obj, which store takes.
func (d *mutationDetector) take(store Key, obj any) {
	o, ok := obj.(k8sruntime.Object)
	if !ok {
		return
	}
	c := o.DeepCopyObject()
	d.mu.Lock()
	d.taken[o] = takenObject{store: store, copy: c}
	d.mu.Unlock()
}

// check returns an error naming each object changed since its store took
// it, or since the last check told of it, with what changed.
func (d *mutationDetector) check() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var changed []string
	for live, t := range d.taken {
		if equality.Semantic.DeepEqual(live, t.copy) {
			continue
		}
		name := "an object"
		if m, err := meta.Accessor(live); err == nil {
			name = m.GetName()
			if ns := m.GetNamespace(); ns != "" {
				name = ns + "/" + name
			}
		}
		changed = append(changed, fmt.Sprintf("store %s: %s was changed in place after the store took it (- as taken, + now):\n%s",
			t.store, name, diff.Diff(t.copy, live)))
		d.taken[live] = takenObject{store: t.store, copy: live.DeepCopyObject()} // told once
	}
	if len(changed) == 0 {
		return nil
	}
	slices.Sort(changed)
	return fmt.Errorf("objects read from stores are shared and read-only; DeepCopy one before changing it:\n%s", strings.Join(changed, "\n"))
}

package fxcontroller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/kinds"
)

// crdKind is the kind the app watches to know which kinds are served.
var crdKind = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// servedConsumer is the consumer of the store of CRDs, in describe.
const servedConsumer = "fxcontroller.WhenServed"

// servedParts keeps of a CRD what tells which kind it serves, and
// whether: its schemas, often most of it, go.
var servedParts = fxstore.Transform{Name: "fxcontroller-served-kinds", Func: keepServedParts}

func keepServedParts(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetGroupVersionKind(u.GroupVersionKind())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetDeletionTimestamp(u.GetDeletionTimestamp())
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	spec := map[string]any{"group": group, "names": map[string]any{"kind": kind}, "versions": keep(versions, "name", "served")}
	out.Object["spec"] = spec
	out.Object["status"] = map[string]any{"conditions": keep(conditions, "type", "status")}
	return out, nil
}

// keep returns the fields named of each map in items.
func keep(items []any, fields ...string) []any {
	out := make([]any, 0, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		kept := map[string]any{}
		for _, f := range fields {
			if v, ok := m[f]; ok {
				kept[f] = v
			}
		}
		out = append(out, kept)
	}
	return out
}

// servedKinds tells the controllers that wait for their kinds which are
// served, from the app's store of CRDs.
type servedKinds struct {
	registry *fxstore.Registry
	crds     *fxstore.Store[*unstructured.Unstructured]

	mu sync.Mutex
	// crdKinds are the kinds a CRD was seen for: one gone is no longer
	// served.
	crdKinds map[schema.GroupKind]bool
	// started are the stores that have started since the app did: a
	// kind no CRD serves is served once one of its stores has started,
	// even when its controllers gave it back since (Switch.Disable).
	started map[fxstore.Key]bool
}

func newServedKinds(r *fxstore.Registry) (*servedKinds, error) {
	crds, err := fxstore.For[*unstructured.Unstructured](r, fxstore.Spec{Kind: crdKind, Transform: servedParts},
		fxstore.WithConsumer(servedConsumer))
	if err != nil {
		return nil, err
	}
	return &servedKinds{registry: r, crds: crds, crdKinds: map[schema.GroupKind]bool{}, started: map[fxstore.Key]bool{}}, nil
}

// notServed names the kinds of keys the API server does not serve now:
// those whose CRD is missing, not established, being deleted, or does
// not serve the version; and, of the kinds no CRD was seen for, those
// whose stores have waited for their kind since the start.
func (s *servedKinds) notServed(keys []fxstore.Key) []string {
	crds, err := s.crds.List()
	if err != nil {
		crds = nil // not synced: nothing is known to be served
	}
	byKind := map[schema.GroupKind]*unstructured.Unstructured{}
	for _, crd := range crds {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		byKind[schema.GroupKind{Group: group, Kind: kind}] = crd
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for gk := range byKind {
		s.crdKinds[gk] = true
	}
	var out []string
	for _, k := range keys {
		gk := k.Kind.GroupKind()
		crd, ok := byKind[gk]
		switch {
		case ok && serves(crd, k.Kind.Version):
			continue
		case ok, s.crdKinds[gk], !s.started[k] && storeHooks.WaitingForKind(s.registry, k):
		default:
			continue // served otherwise, as at start
		}
		if name := kinds.Name(k.Kind); !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// watch calls notify on each change of a CRD, until unwatch is called.
func (s *servedKinds) watch(notify func()) (unwatch func(), err error) {
	inf := s.crds.Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	})
	if err != nil {
		return nil, fmt.Errorf("watch CustomResourceDefinitions: %w", err)
	}
	return func() { _ = inf.RemoveEventHandler(reg) }, nil
}

// serves reports whether crd, as servedParts keeps it, is established,
// not being deleted, and serves version.
func serves(crd *unstructured.Unstructured, version string) bool {
	if crd.GetDeletionTimestamp() != nil {
		return false
	}
	established := false
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == string(metav1.ConditionTrue) {
			established = true
		}
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok && m["name"] == version && m["served"] == true {
			return established
		}
	}
	return false
}

// keys are the keys of the controller's stores, each once.
func (c *Controller) keys() []fxstore.Key {
	var keys []fxstore.Key
	for _, src := range c.sources {
		if !slices.Contains(keys, src.key) {
			keys = append(keys, src.key)
		}
	}
	return keys
}

// retryServe bounds the wait before serving stores again that could not
// start, such as when the API server lists a CRD's objects only a moment
// after it is established.
const retryServe = 5 * time.Second

// await waits for changed, d or the end of ctx, and reports whether ctx
// has not ended.
func await(ctx context.Context, changed <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-changed:
	case <-t.C:
	case <-ctx.Done():
	}
	return ctx.Err() == nil
}

// serveStores starts the stores of keys and waits until they have synced;
// release gives them back.
func (c *Controller) serveStores(ctx context.Context, keys []fxstore.Key) (release func(), err error) {
	c.setStatus(Status{State: Starting})
	var releases []func()
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	for _, k := range keys {
		r, err := storeHooks.Serve(ctx, c.served.registry, k)
		if err != nil {
			release()
			return nil, err
		}
		releases = append(releases, r)
	}
	for _, k := range keys {
		if err := c.served.registry.WaitForStore(ctx, k); err != nil {
			release()
			return nil, err
		}
	}
	c.served.mu.Lock()
	for _, k := range keys {
		c.served.started[k] = true
	}
	c.served.mu.Unlock()
	return release, nil
}

// waitingConsumers returns the consumers of the requests of the
// controllers that wait for their kinds, among cs: their names, and their
// constructors' unless a controller that does not wait shares it.
func waitingConsumers(cs []*Controller) []string {
	shared := map[string]bool{}
	for _, c := range cs {
		if !c.whenServed {
			shared[c.name], shared[c.declaredBy] = true, true
		}
	}
	var out []string
	for _, c := range cs {
		if !c.whenServed {
			continue
		}
		for _, consumer := range []string{c.name, c.declaredBy} {
			if !shared[consumer] && !slices.Contains(out, consumer) {
				out = append(out, consumer)
			}
		}
	}
	return out
}

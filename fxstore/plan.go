package fxstore

import (
	"maps"

	"k8s.io/client-go/tools/cache"
)

// broadestCover returns the broadest of candidates, those eligible, that
// covers e; nil if none. Of two equivalent specs written apart, the one that
// sorts first covers the other. The registry's lock is held.
func broadestCover(e *entry, candidates []*entry, eligible func(*entry) bool) *entry {
	var best *entry
	narrow := e.parsedKey()
	for _, b := range candidates {
		if b == e || !covers(b.parsedKey(), narrow) || !eligible(b) {
			continue
		}
		if covers(narrow, b.parsedKey()) && e.key.String() < b.key.String() {
			continue
		}
		if best == nil || covers(b.parsedKey(), best.parsedKey()) {
			best = b
		}
	}
	return best
}

// planViews returns, for each store whose objects are a subset of a
// broader store's, the broadest such store, to serve it as a view of (chains
// collapse: a ⊂ b ⊂ c makes a and b views of c): unless it is pinned to an
// informer of its own or cannot be filtered on the client. The registry's
// lock is held.
func (r *Registry) planViews(all []*entry) map[*entry]*entry {
	parentOf := func(e *entry) *entry {
		if e.pinned {
			return nil
		}
		return broadestCover(e, all, func(*entry) bool { return true })
	}
	parents := make(map[*entry]*entry, len(all))
	for _, e := range all {
		if p := parentOf(e); p != nil {
			parents[e] = p
		}
	}
	plan := make(map[*entry]*entry)
	for _, e := range all {
		root := e
		for range all {
			p, ok := parents[root]
			if !ok {
				break
			}
			root = p
		}
		if root == e {
			continue
		}
		if _, ok := e.viewFilter(root); ok {
			plan[e] = root
		}
	}
	return plan
}

// viewFilter returns what the store selects of parent's objects, if the
// store can be a view of parent: the client can evaluate it, its objects
// can be made from parent's, and parent has no index of another function
// by the name its own indexes take there. The registry's lock is held.
func (e *entry) viewFilter(parent *entry) (viewSelection, bool) {
	if parent.asBytes {
		// Its informer holds bytes, not objects a view can match.
		return viewSelection{}, false
	}
	sel, err := viewSelectionOf(parent.parsedKey(), e.parsedKey())
	if err != nil {
		return viewSelection{}, false
	}
	projected := parent.key.Projection != e.key.Projection
	if projected && !hasObjectMeta(parent.example) {
		return viewSelection{}, false
	}
	for name, id := range e.indexFuncs {
		if pid, ok := parent.indexFuncs[parentIndexName(projected, name)]; ok && pid != id {
			return viewSelection{}, false
		}
	}
	return sel, true
}

// parsedKey returns the store's key, parsed. The registry's lock is held.
func (e *entry) parsedKey() *parsedKey {
	if e.parsed == nil {
		e.parsed = parseKey(e.key)
	}
	return e.parsed
}

// parentIndexName is the name an index declared on a view takes on its
// parent's informer. A metadata-only view's index functions take its
// objects, not the parent's: they get names of their own there, wrapped.
func parentIndexName(projected bool, name string) string {
	if projected {
		return "fxstore metadata " + name
	}
	return name
}

// serveAsView makes the store a view of parent, moving its indexes to
// parent's informer, when viewFilter allows. The registry's lock is held.
func (e *entry) serveAsView(parent *entry) bool {
	sel, ok := e.viewFilter(parent)
	if !ok {
		return false
	}
	var project *metadataProjection
	if parent.key.Projection != e.key.Projection {
		project = newMetadataProjection(e.key.Kind)
	}
	moved, names := cache.Indexers{}, make(map[string]string, len(e.indexers))
	for name, fn := range e.indexers {
		pname := parentIndexName(project != nil, name)
		names[name] = pname
		if _, ok := parent.indexFuncs[pname]; !ok {
			moved[pname] = project.indexFunc(fn)
		}
	}
	if err := parent.informer.AddIndexers(moved); err != nil {
		return false
	}
	for name, pname := range names {
		if fn, ok := moved[pname]; ok {
			parent.indexFuncs[pname] = e.indexFuncs[name]
			parent.indexers[pname] = fn
		}
	}
	v, err := newView(parent, e.key, sel, project, names, maps.Clone(e.indexers))
	if err != nil {
		return false
	}
	e.backed.Store(&backingRef{v})
	return true
}

package fxstore

import (
	"maps"
	"slices"
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
// store can be a view of parent: the client can evaluate it, and its
// objects can be made from parent's. The registry's lock is held.
func (e *entry) viewFilter(parent *entry) (viewSelection, bool) {
	if parent.asBytes {
		// Its informer holds bytes, not objects a view can match.
		return viewSelection{}, false
	}
	sel, err := viewSelectionOf(parent.parsedKey(), e.parsedKey())
	if err != nil {
		return viewSelection{}, false
	}
	if parent.key.Projection != e.key.Projection && !hasObjectMeta(parent.example) {
		return viewSelection{}, false
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

// serveAsView makes the store a view of parent, with its indexes on
// parent's informer, when viewFilter allows. Its handlers are tracked
// while parent may go before it: when parent has no request for the
// life of the app. The registry's lock is held.
func (e *entry) serveAsView(parent *entry) bool {
	v, ok := e.viewOf(parent)
	if !ok {
		return false
	}
	e.trackHandlers.Store(parent.lasting == 0)
	e.backed.Store(&backingRef{v})
	return true
}

// viewOf returns a view of parent to serve the store, with its indexes on
// parent's informer, when viewFilter allows. The registry's lock is held.
func (e *entry) viewOf(parent *entry) (*view, bool) {
	sel, ok := e.viewFilter(parent)
	if !ok {
		return nil, false
	}
	var project *metadataProjection
	if parent.key.Projection != e.key.Projection {
		project = newMetadataProjection(e.key.Kind)
	}
	v, err := newView(parent, e, sel, project)
	if err != nil {
		return nil, false
	}
	if err := v.addIndexes(slices.Collect(maps.Values(e.indexes))); err != nil {
		v.close()
		return nil, false
	}
	return v, true
}

package fxstore

import (
	"fmt"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Covers reports whether a store of broad holds every object a store of
// narrow would, and so can serve narrow as a view: same kind and transform;
// the same projection, or a typed broad and a metadata-only narrow with one
// of the built-in transforms (whose result has the same metadata whichever
// the projection; a transform of one's own may tell them apart); broad's
// namespace is all of them or narrow's; narrow's label selector implies
// broad's; and broad's field selector is narrow's, or a part of it whose
// rest can be evaluated exactly on the client (metadata.name,
// metadata.namespace). Sharded keys neither cover nor are covered.
func Covers(broad, narrow Key) bool {
	if broad.Kind != narrow.Kind || broad.Transform != narrow.Transform || !projectionCovered(broad, narrow) {
		return false
	}
	if broad.Shard != "" || narrow.Shard != "" {
		return false // a shard is the API server's to select
	}
	if broad.Namespace != "" && broad.Namespace != narrow.Namespace {
		return false
	}
	if !fieldsCovered(broad.FieldSelector, narrow.FieldSelector) {
		return false
	}
	b, err := labels.Parse(broad.LabelSelector)
	if err != nil {
		return false
	}
	n, err := labels.Parse(narrow.LabelSelector)
	if err != nil {
		return false
	}
	return labelsImply(n, b)
}

// projectionCovered reports whether narrow's objects can be made from
// broad's: the same projection, or their metadata.
func projectionCovered(broad, narrow Key) bool {
	if broad.Projection == narrow.Projection {
		return true
	}
	builtIn := narrow.Transform == StripManagedFields.Name || narrow.Transform == KeepEverything.Name
	return broad.Projection == Typed && narrow.Projection == Metadata && builtIn
}

// fieldsCovered reports whether every field requirement of broad is one of
// narrow's and narrow's others are on fields the client can evaluate.
func fieldsCovered(broad, narrow string) bool {
	rest, ok := fieldsBeyond(broad, narrow)
	if !ok {
		return false
	}
	for _, r := range rest {
		if !clientSideField(r.Field) {
			return false
		}
	}
	return true
}

// fieldsBeyond returns narrow's field requirements that broad does not
// have, and whether broad's are all narrow's.
func fieldsBeyond(broad, narrow string) ([]fields.Requirement, bool) {
	b, err := fields.ParseSelector(broad)
	if err != nil {
		return nil, false
	}
	n, err := fields.ParseSelector(narrow)
	if err != nil {
		return nil, false
	}
	rest := n.Requirements()
	for _, r := range b.Requirements() {
		i := slices.Index(rest, r)
		if i < 0 {
			return nil, false
		}
		rest = slices.Delete(rest, i, i+1)
	}
	return rest, true
}

func clientSideField(field string) bool {
	return field == "metadata.name" || field == "metadata.namespace"
}

// labelsImply reports whether every label set narrow matches is matched by
// broad. It is exact for the requirements it understands and says false
// when unsure, so a view never misses an object.
func labelsImply(narrow, broad labels.Selector) bool {
	if broad.Empty() {
		return true
	}
	br, ok := broad.Requirements()
	if !ok {
		return false // broad matches nothing: only a selector that matches nothing implies it
	}
	nr, ok := narrow.Requirements()
	if !ok {
		return true
	}
	constraints := make(map[string]*keyConstraint)
	for _, r := range nr {
		c := constraints[r.Key()]
		if c == nil {
			c = &keyConstraint{}
			constraints[r.Key()] = c
		}
		if !c.add(r) {
			return false
		}
	}
	for _, c := range constraints {
		if c.unsatisfiable() {
			return true // narrow matches nothing
		}
	}
	for _, r := range br {
		c := constraints[r.Key()]
		if c == nil {
			c = &keyConstraint{}
		}
		if !c.implies(r) {
			return false
		}
	}
	return true
}

// keyConstraint is what a selector's requirements on one key allow: the
// key present or absent, and which values.
type keyConstraint struct {
	present bool                // the key must be present
	absent  bool                // the key must be absent
	in      map[string]struct{} // nil: any value; else only these
	notIn   map[string]struct{}
	gt, lt  *int64 // the value must be an integer beyond these
}

// add narrows c by r; false for an operator it does not know.
func (c *keyConstraint) add(r labels.Requirement) bool {
	values := r.ValuesUnsorted()
	switch r.Operator() {
	case selection.In, selection.Equals, selection.DoubleEquals:
		c.present = true
		next := make(map[string]struct{}, len(values))
		for _, v := range values {
			if _, ok := c.in[v]; c.in == nil || ok {
				next[v] = struct{}{}
			}
		}
		c.in = next
	case selection.NotIn, selection.NotEquals:
		if c.notIn == nil {
			c.notIn = make(map[string]struct{}, len(values))
		}
		for _, v := range values {
			c.notIn[v] = struct{}{}
		}
	case selection.Exists:
		c.present = true
	case selection.DoesNotExist:
		c.absent = true
	case selection.GreaterThan, selection.LessThan:
		if len(values) != 1 {
			return false
		}
		n, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return false
		}
		c.present = true
		if r.Operator() == selection.GreaterThan {
			if c.gt == nil || n > *c.gt {
				c.gt = &n
			}
		} else if c.lt == nil || n < *c.lt {
			c.lt = &n
		}
	default:
		return false
	}
	return true
}

// allows reports whether a label with value v meets c.
func (c *keyConstraint) allows(v string) bool {
	if c.absent {
		return false
	}
	if _, ok := c.in[v]; c.in != nil && !ok {
		return false
	}
	if _, ok := c.notIn[v]; ok {
		return false
	}
	if c.gt != nil || c.lt != nil {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || (c.gt != nil && n <= *c.gt) || (c.lt != nil && n >= *c.lt) {
			return false
		}
	}
	return true
}

// allowed returns the values c allows, when they are finitely many.
func (c *keyConstraint) allowed() (values []string, finite bool) {
	if c.in == nil {
		return nil, false
	}
	for v := range c.in {
		if c.allows(v) {
			values = append(values, v)
		}
	}
	return values, true
}

// unsatisfiable reports whether no label set meets c.
func (c *keyConstraint) unsatisfiable() bool {
	if c.present && c.absent {
		return true
	}
	values, finite := c.allowed()
	if finite && len(values) == 0 {
		return true // c.in is set, so the key must be present
	}
	if c.gt != nil && c.lt != nil && *c.lt-*c.gt <= 1 {
		return true
	}
	return false
}

// implies reports whether every label set meeting c meets r, on c's key.
func (c *keyConstraint) implies(r labels.Requirement) bool {
	values, finite := c.allowed()
	noValue := c.absent || (finite && len(values) == 0)
	switch r.Operator() {
	case selection.In, selection.Equals, selection.DoubleEquals:
		if !c.present || !finite {
			return false
		}
		for _, v := range values {
			if !r.Values().Has(v) {
				return false
			}
		}
		return true
	case selection.NotIn, selection.NotEquals:
		for _, v := range r.ValuesUnsorted() {
			if c.allows(v) {
				return false
			}
		}
		return true
	case selection.Exists:
		return c.present
	case selection.DoesNotExist:
		return noValue
	case selection.GreaterThan, selection.LessThan:
		bound, err := strconv.ParseInt(r.ValuesUnsorted()[0], 10, 64)
		if err != nil || !c.present {
			return false
		}
		if finite {
			for _, v := range values {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || (r.Operator() == selection.GreaterThan && n <= bound) || (r.Operator() == selection.LessThan && n >= bound) {
					return false
				}
			}
			return true
		}
		if r.Operator() == selection.GreaterThan {
			return c.gt != nil && *c.gt >= bound
		}
		return c.lt != nil && *c.lt <= bound
	}
	return false
}

// KeyMatcher returns a function that tells whether an object belongs in the
// store of key, evaluating on the client what the API server selects: its
// namespace, its label selector and its field selector, which must be on
// metadata.name and metadata.namespace only (an error says which field is
// not), and its shard. Views of a broader store use it to filter, as
// fxstoretest's source does to select. Matching allocates nothing, but for
// a shard.
func KeyMatcher(key Key) (func(client.Object) bool, error) {
	sel, err := labels.Parse(key.LabelSelector)
	if err != nil {
		return nil, err
	}
	fsel, err := fields.ParseSelector(key.FieldSelector)
	if err != nil {
		return nil, err
	}
	reqs := fsel.Requirements()
	for _, r := range reqs {
		if !clientSideField(r.Field) {
			return nil, fmt.Errorf("field %q cannot be selected on the client; only metadata.name and metadata.namespace can", r.Field)
		}
	}
	namespace := key.Namespace
	lreqs, _ := sel.Requirements()
	matchLabels := labelMatchers(lreqs)
	inShard, err := shardMatcher(key)
	if err != nil {
		return nil, err
	}
	if inShard != nil {
		match := keyMatcher(namespace, reqs, matchLabels)
		return func(obj client.Object) bool { return match(obj) && inShard(obj) }, nil
	}
	return keyMatcher(namespace, reqs, matchLabels), nil
}

func keyMatcher(namespace string, reqs fields.Requirements, matchLabels []func(map[string]string) bool) func(client.Object) bool {
	return func(obj client.Object) bool {
		if namespace != "" && obj.GetNamespace() != namespace {
			return false
		}
		for _, r := range reqs {
			v := obj.GetName()
			if r.Field == "metadata.namespace" {
				v = obj.GetNamespace()
			}
			if (v == r.Value) == (r.Operator == selection.NotEquals) {
				return false
			}
		}
		if len(matchLabels) == 0 {
			return true
		}
		set := obj.GetLabels()
		for _, m := range matchLabels {
			if !m(set) {
				return false
			}
		}
		return true
	}
}

// labelMatchers returns one function per requirement telling whether a
// label set meets it, as labels.Requirement.Matches does, with the common
// operators on one value compiled to a single map lookup: views evaluate
// their selector on every Get.
func labelMatchers(reqs labels.Requirements) []func(map[string]string) bool {
	out := make([]func(map[string]string) bool, len(reqs))
	for i, r := range reqs {
		key, values := r.Key(), r.ValuesUnsorted()
		switch op := r.Operator(); {
		case op == selection.Exists:
			out[i] = func(set map[string]string) bool { _, ok := set[key]; return ok }
		case op == selection.DoesNotExist:
			out[i] = func(set map[string]string) bool { _, ok := set[key]; return !ok }
		case len(values) == 1 && (op == selection.Equals || op == selection.DoubleEquals || op == selection.In):
			want := values[0]
			out[i] = func(set map[string]string) bool { v, ok := set[key]; return ok && v == want }
		case len(values) == 1 && (op == selection.NotEquals || op == selection.NotIn):
			want := values[0]
			out[i] = func(set map[string]string) bool { v, ok := set[key]; return !ok || v != want }
		default:
			out[i] = func(set map[string]string) bool { return r.Matches(labels.Set(set)) }
		}
	}
	return out
}

// viewMatcher is KeyMatcher for a view of broad: only what broad does not
// already select is evaluated (its namespace, label requirements that
// follow from broad's, field requirements broad selects on the server).
func viewMatcher(broad, narrow Key) (func(client.Object) bool, error) {
	rest, ok := fieldsBeyond(broad.FieldSelector, narrow.FieldSelector)
	if !ok {
		return nil, fmt.Errorf("fields %q are not all of %q", broad.FieldSelector, narrow.FieldSelector)
	}
	if broad.Namespace == narrow.Namespace {
		narrow.Namespace = ""
	}
	bsel, err := labels.Parse(broad.LabelSelector)
	if err != nil {
		return nil, err
	}
	nsel, err := labels.Parse(narrow.LabelSelector)
	if err != nil {
		return nil, err
	}
	nreqs, _ := nsel.Requirements()
	beyond := labels.NewSelector()
	for _, r := range nreqs {
		if !labelsImply(bsel, labels.NewSelector().Add(r)) {
			beyond = beyond.Add(r)
		}
	}
	narrow.LabelSelector = beyond.String()
	terms := make([]fields.Selector, len(rest))
	for i, r := range rest {
		if r.Operator == selection.NotEquals {
			terms[i] = fields.OneTermNotEqualSelector(r.Field, r.Value)
		} else {
			terms[i] = fields.OneTermEqualSelector(r.Field, r.Value)
		}
	}
	narrow.FieldSelector = fields.AndSelectors(terms...).String()
	return KeyMatcher(narrow)
}

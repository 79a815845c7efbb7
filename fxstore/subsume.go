package fxstore

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// parsedKey is a key with its selectors parsed, for comparing it with
// others many times over, as planning views compares every pair of stores.
type parsedKey struct {
	Key
	// labels is nil when the label selector does not parse; then so is
	// constraints.
	labels      labels.Selector
	constraints *labelConstraints
	fields      fields.Requirements
	fieldsOK    bool // the field selector parses
}

func parseKey(k Key) *parsedKey {
	p := &parsedKey{Key: k}
	if sel, err := labels.Parse(k.LabelSelector); err == nil {
		p.labels, p.constraints = sel, constraintsOf(sel)
	}
	if sel, err := fields.ParseSelector(k.FieldSelector); err == nil {
		p.fields, p.fieldsOK = sel.Requirements(), true
	}
	return p
}

// covers reports whether a store of broad holds every object a store of
// narrow would, and so can serve narrow as a view: same kind and transform;
// the same projection, or a typed broad and a metadata-only narrow with one
// of the built-in transforms (whose result has the same metadata whichever
// the projection; a transform of one's own may tell them apart); broad's
// namespace is all of them or narrow's; narrow's label selector implies
// broad's; and broad's field selector is narrow's, or a part of it whose
// rest can be evaluated exactly on the client (metadata.name,
// metadata.namespace). Sharded keys neither cover nor are covered.
func covers(broad, narrow *parsedKey) bool {
	if broad.Kind != narrow.Kind || broad.Transform != narrow.Transform || !projectionCovered(broad.Key, narrow.Key) {
		return false
	}
	if broad.Shard != "" || narrow.Shard != "" {
		return false // a shard is the API server's to select
	}
	if broad.Namespace != "" && broad.Namespace != narrow.Namespace {
		return false
	}
	if !fieldsCovered(broad, narrow) {
		return false
	}
	if broad.labels == nil || narrow.labels == nil {
		return false
	}
	return implies(narrow.constraints, broad.labels)
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
func fieldsCovered(broad, narrow *parsedKey) bool {
	rest, ok := fieldsBeyond(broad, narrow)
	return ok && onClientSide(rest) == nil
}

// fieldsBeyond returns narrow's field requirements that broad does not
// have, and whether broad's are all narrow's.
func fieldsBeyond(broad, narrow *parsedKey) ([]fields.Requirement, bool) {
	if !broad.fieldsOK || !narrow.fieldsOK {
		return nil, false
	}
	rest := slices.Clone(narrow.fields)
	for _, r := range broad.fields {
		i := slices.Index(rest, r)
		if i < 0 {
			return nil, false
		}
		rest = slices.Delete(rest, i, i+1)
	}
	return rest, true
}

// onClientSide returns why reqs cannot all be evaluated on the client: a
// field other than metadata.name and metadata.namespace.
func onClientSide(reqs fields.Requirements) error {
	for _, r := range reqs {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			return fmt.Errorf("field %q cannot be selected on the client; only metadata.name and metadata.namespace can", r.Field)
		}
	}
	return nil
}

// labelConstraints is what a selector's requirements allow, by key: the
// narrow side of implies, worked out once for any number of broad
// selectors.
type labelConstraints struct {
	byKey   map[string]*keyConstraint
	nothing bool // no label set meets them
	unknown bool // an operator add does not know
}

func constraintsOf(sel labels.Selector) *labelConstraints {
	reqs, ok := sel.Requirements()
	if !ok {
		return &labelConstraints{nothing: true}
	}
	c := &labelConstraints{byKey: make(map[string]*keyConstraint, len(reqs))}
	for _, r := range reqs {
		k := c.byKey[r.Key()]
		if k == nil {
			k = &keyConstraint{}
			c.byKey[r.Key()] = k
		}
		if !k.add(r) {
			return &labelConstraints{unknown: true}
		}
	}
	for _, k := range c.byKey {
		if k.unsatisfiable() {
			c.nothing = true
			break
		}
	}
	return c
}

// implies reports whether every label set that narrow's selector matches
// is matched by broad. It is exact for the requirements it understands and
// says false when unsure, so a view never misses an object.
func implies(narrow *labelConstraints, broad labels.Selector) bool {
	if broad.Empty() {
		return true
	}
	br, ok := broad.Requirements()
	if !ok {
		return false // broad matches nothing: only a selector that matches nothing implies it
	}
	return narrow.imply(br)
}

// imply reports whether every label set meeting c meets each of reqs.
func (c *labelConstraints) imply(reqs labels.Requirements) bool {
	switch {
	case c.unknown:
		return false
	case c.nothing:
		return true
	}
	for _, r := range reqs {
		k := c.byKey[r.Key()]
		if k == nil {
			k = &keyConstraint{}
		}
		if !k.implies(r) {
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

// matcherOf returns a function that tells whether an object belongs in the
// store of key, evaluating on the client what the API server selects: its
// namespace, its label selector and its field selector, which must be on
// metadata.name and metadata.namespace only (an error says which field is
// not), and its shard. Views of a broader store use it to filter, as
// fxstoretest's source does to select. Matching allocates nothing, but for
// a shard.
func matcherOf(key Key) (func(client.Object) bool, error) {
	sel, err := labels.Parse(key.LabelSelector)
	if err != nil {
		return nil, err
	}
	fsel, err := fields.ParseSelector(key.FieldSelector)
	if err != nil {
		return nil, err
	}
	reqs := fsel.Requirements()
	if err := onClientSide(reqs); err != nil {
		return nil, err
	}
	lreqs, _ := sel.Requirements()
	inShard, err := shardMatcher(key)
	if err != nil {
		return nil, err
	}
	return viewSelection{namespace: key.Namespace, fields: reqs, labels: lreqs, inShard: inShard}.matcher(), nil
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

// viewSelection is what a view selects of its broader store's objects:
// only what the broader store does not select already.
type viewSelection struct {
	namespace string              // "" when the broader store's is the view's
	fields    fields.Requirements // on metadata.name and metadata.namespace
	labels    labels.Requirements // those broad's do not imply
	// inShard is the view's shard, when it has one and the broader store
	// has none (see Registry.checkShardSelectors); else nil.
	inShard func(k8sruntime.Object) bool
}

// viewSelectionOf returns what narrow selects of broad's objects, or why
// the client cannot select it.
func viewSelectionOf(broad, narrow *parsedKey) (viewSelection, error) {
	if broad.Shard != "" {
		return viewSelection{}, errors.New("a sharded store has no views")
	}
	if broad.labels == nil || narrow.labels == nil {
		return viewSelection{}, fmt.Errorf("labels %q or %q do not parse", broad.LabelSelector, narrow.LabelSelector)
	}
	rest, ok := fieldsBeyond(broad, narrow)
	if !ok {
		return viewSelection{}, fmt.Errorf("fields %q are not all of %q", broad.FieldSelector, narrow.FieldSelector)
	}
	if err := onClientSide(rest); err != nil {
		return viewSelection{}, err
	}
	sel := viewSelection{namespace: narrow.Namespace, fields: rest}
	inShard, err := shardMatcher(narrow.Key)
	if err != nil {
		return viewSelection{}, err
	}
	sel.inShard = inShard
	if broad.Namespace == narrow.Namespace {
		sel.namespace = ""
	}
	nreqs, _ := narrow.labels.Requirements()
	for _, r := range nreqs {
		if !broad.constraints.imply(labels.Requirements{r}) {
			sel.labels = append(sel.labels, r)
		}
	}
	return sel, nil
}

// matcher returns matcherOf's function for the view: it evaluates only
// what the broader store does not select.
func (s viewSelection) matcher() func(client.Object) bool {
	match := keyMatcher(s.namespace, s.fields, labelMatchers(s.labels))
	if s.inShard == nil {
		return match
	}
	return func(obj client.Object) bool { return match(obj) && s.inShard(obj) }
}

// namespaceOnly reports whether the view selects by namespace alone, or
// selects every object of the broader store when its namespace is "".
func (s viewSelection) namespaceOnly() bool {
	return len(s.fields) == 0 && len(s.labels) == 0 && s.inShard == nil
}

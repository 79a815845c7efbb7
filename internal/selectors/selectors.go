// Package selectors canonicalises the selectors of a store's spec: label,
// field and shard selectors. Equivalent selectors have one canonical form,
// so that equivalent specs are one store's key.
package selectors

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Memo memoises Label and Field by the selector as written: an app's
// modules ask for a few specs many times over, and parsing a label
// selector checks every key and value with regular expressions. Errors
// are kept as well, so a bad selector fails alike each time. It holds one
// entry per distinct selector asked for. The zero value is ready to use.
type Memo struct {
	byLabels, byFields sync.Map // selector as written → canonicalForm
}

// canonicalForm is what canonicalising a selector returned.
type canonicalForm struct {
	selector string
	err      error
}

// Labels is Label, memoised.
func (m *Memo) Labels(s string) (string, error) { return canonicalOnce(&m.byLabels, s, Label) }

// Fields is Field, memoised.
func (m *Memo) Fields(s string) (string, error) { return canonicalOnce(&m.byFields, s, Field) }

func canonicalOnce(memo *sync.Map, s string, canonical func(string) (string, error)) (string, error) {
	if f, ok := memo.Load(s); ok {
		f := f.(canonicalForm)
		return f.selector, f.err
	}
	selector, err := canonical(s)
	memo.Store(s, canonicalForm{selector, err})
	return selector, err
}

// Label parses a label selector and returns its canonical form: requirements sorted and deduplicated, "==" written "=", and one-value
// "in"/"notin" written "="/"!=". Equivalent selectors have equal canonical
// forms, and canonicalising a canonical form changes nothing.
func Label(s string) (string, error) {
	if err := checkControlChars(s); err != nil {
		return "", fmt.Errorf("invalid label selector %q: %w", s, err)
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return "", fmt.Errorf("invalid label selector %q: %w", s, err)
	}
	reqs, _ := sel.Requirements()
	terms := make([]string, 0, len(reqs))
	for _, r := range reqs {
		op, vals := r.Operator(), r.Values().UnsortedList()
		switch {
		case op == selection.DoubleEquals, op == selection.In && len(vals) == 1:
			op = selection.Equals
		case op == selection.NotIn && len(vals) == 1:
			op = selection.NotEquals
		}
		nr, err := labels.NewRequirement(r.Key(), op, vals)
		if err != nil {
			return "", fmt.Errorf("invalid label selector %q: %w", s, err)
		}
		terms = append(terms, nr.String())
	}
	slices.Sort(terms)
	return strings.Join(slices.Compact(terms), ","), nil
}

// Field parses a field selector and returns its canonical form: terms sorted and deduplicated and "==" written "=".
func Field(s string) (string, error) {
	if err := checkControlChars(s); err != nil {
		return "", fmt.Errorf("invalid field selector %q: %w", s, err)
	}
	sel, err := fields.ParseSelector(s)
	if err != nil {
		return "", fmt.Errorf("invalid field selector %q: %w", s, err)
	}
	reqs := sel.Requirements()
	terms := make([]string, 0, len(reqs))
	for _, r := range reqs {
		field := strings.TrimSpace(r.Field)
		if !validField(field) {
			return "", fmt.Errorf("invalid field selector %q: field %q is not a field path such as metadata.name", s, field)
		}
		if r.Operator == selection.NotEquals {
			terms = append(terms, fields.OneTermNotEqualSelector(field, r.Value).String())
		} else {
			terms = append(terms, fields.OneTermEqualSelector(field, r.Value).String())
		}
	}
	slices.Sort(terms)
	return strings.Join(slices.Compact(terms), ","), nil
}

// checkControlChars rejects control characters other than whitespace, which
// apimachinery's label parser takes for the end of input: "a=1,\x00b=2" would
// silently select everything.
func checkControlChars(s string) error {
	for i, r := range s {
		if r < 0x20 && r != ' ' && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return fmt.Errorf("control character %q at byte %d", r, i)
		}
	}
	return nil
}

// validField reports whether f looks like a field path the API server
// accepts, such as "metadata.name" or "spec.nodeName".
func validField(f string) bool {
	if f == "" {
		return false
	}
	for _, r := range f {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '.', r == '_', r == '-', r == '/':
		default:
			return false
		}
	}
	return true
}

package fxcontroller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Selection chooses which of the app's controllers run, in
// kube-controller-manager's --controllers syntax:
//
//   - "*" runs every controller;
//   - "name" runs the controller or hosted operator of that name, or the
//     controllers a module's Go package of that name declares;
//   - "-name" leaves it out, and wins over "name".
//
// "*,-mirror" runs all but mirror's; "rollout" runs rollout's alone. The
// zero Selection runs every controller, as "*" does. A controller left out
// is built but never runs. The requests its constructor made before start,
// under the controller's name or the constructor's (fxstore's default
// consumer), are given back: a store no one else asked for never starts,
// and describe and rbac leave both out. A hosted operator left out is not
// set up.
type Selection struct {
	items []string
}

// Select returns the selection of items, each "*", a name or "-name".
func Select(items ...string) (Selection, error) {
	var errs []error
	for _, it := range items {
		name := strings.TrimPrefix(it, "-")
		switch {
		case it == "*":
		case name == "" || name == "*":
			errs = append(errs, fmt.Errorf("%q is not \"*\", a controller's name or \"-\" and a name", it))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Selection{}, fmt.Errorf("--controllers: %w", err)
	}
	return Selection{items: slices.Clone(items)}, nil
}

// Enabled reports whether what is named by any of names runs: a
// controller by its name and its package's, a hosted operator by its
// name.
func (s Selection) Enabled(names ...string) bool {
	if s.items == nil {
		return true
	}
	for _, name := range names {
		if slices.Contains(s.items, "-"+name) {
			return false
		}
	}
	for _, name := range names {
		if slices.Contains(s.items, name) {
			return true
		}
	}
	return slices.Contains(s.items, "*")
}

// String returns the selection as the flag takes it.
func (s Selection) String() string {
	if s.items == nil {
		return "*"
	}
	return strings.Join(s.items, ",")
}

// check fails if the selection names a controller known does not hold.
func (s Selection) check(known []string) error {
	var names []string
	for _, it := range s.items {
		if it != "*" {
			names = append(names, strings.TrimPrefix(it, "-"))
		}
	}
	return checkKnown("--controllers", names, known)
}

// checkKnown fails if names, given to what, holds a name known does not,
// and lists known: the names of the app's controllers, their modules'
// packages and its hosted operators.
func checkKnown(what string, names, known []string) error {
	var unknown []string
	for _, name := range names {
		if !slices.Contains(known, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	known = slices.Compact(slices.Sorted(slices.Values(known)))
	return fmt.Errorf("%s names %q, which the app does not have; its controllers, their modules' packages and its hosted operators are %q", what, unknown, known)
}

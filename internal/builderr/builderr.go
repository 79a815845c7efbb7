// Package builderr turns the error of fx.New into the line a user reads:
// what the module that failed said, not dig's account of the graph.
package builderr

import (
	"errors"
	"reflect"
	"strings"
)

// Readable returns err, from fx.New, as the error of the constructor or
// invoke that failed: the first error in its chain that neither fx nor dig
// made, such as `hosted operator "lws": ...`. Its Error is that one
// message; Unwrap returns err, so errors.Is and errors.As see the whole
// chain. An error made only by fx or dig (a missing type, a cycle), or
// nil, is returned as it is: dig's message is the one that says it.
func Readable(err error) error {
	if err == nil {
		return nil
	}
	if !madeByFx(err) {
		return err // the error itself says it
	}
	for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
		if !madeByFx(e) {
			return readable{cause: e, full: err}
		}
	}
	return err
}

// madeByFx reports an error of fx's or dig's own types.
func madeByFx(err error) bool {
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pkg := t.PkgPath()
	return strings.HasPrefix(pkg, "go.uber.org/dig") || strings.HasPrefix(pkg, "go.uber.org/fx")
}

type readable struct{ cause, full error }

func (r readable) Error() string { return r.cause.Error() }
func (r readable) Unwrap() error { return r.full }

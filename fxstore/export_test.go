package fxstore

import (
	"context"
	"reflect"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What the registry does for fxkube's other packages (through
// internal/storehooks), and its selector machinery, exported for this
// package's tests.
var (
	KeyMatcher    = matcherOf
	JSONMayChange = jsonMayChange
)

// Covers reports whether a store of broad can serve narrow as a view.
func Covers(broad, narrow Key) bool { return covers(parseKey(broad), parseKey(narrow)) }

// KeyFor returns the key of the store For[T] would return for spec.
func KeyFor[T client.Object](r *Registry, spec Spec) (Key, error) {
	key, _, err := r.keyFor(reflect.TypeFor[T](), spec)
	return key, err
}

func (r *Registry) Delay(name string) (release func()) { return r.delay(name) }
func (r *Registry) CheckShardSelectors(ctx context.Context, key Key) (bool, error) {
	return r.checkShardSelectors(ctx, key)
}

// Requests returns how many requests for stores the registry served.
func (r *Registry) Requests() int {
	n := 0
	for _, s := range r.Stores() {
		n += len(s.Consumers)
	}
	return n
}

// WithListCheck returns src, whose plain list of one object (which
// diagnoses make) returns what check returns.
func WithListCheck(src Source, check func(context.Context, Key) error) Source {
	return listCheckSource{src, check}
}

type listCheckSource struct {
	Source
	check func(context.Context, Key) error
}

func (s listCheckSource) CheckList(ctx context.Context, key Key) error { return s.check(ctx, key) }

// HeldEncoding returns the bytes a store held as bytes keeps of obj.
func HeldEncoding(obj k8sruntime.Object) ([]byte, error) {
	h, err := newWireCodec(obj).encode(obj, nil)
	if err != nil {
		return nil, err
	}
	w := h.(*held).wire
	return w.AppendTo(nil), nil
}

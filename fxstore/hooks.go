package fxstore

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/internal/primary"
	"github.com/fxkube/fxkube/internal/storehooks"
)

// init gives fxkube's other packages what the registry does for them but
// not for users (see internal/storehooks).
func init() {
	storehooks.Set(&storehooks.Hooks[*Registry, Key, Spec, Option]{
		Delay:   (*Registry).delay,
		Sharded: sharded,
		CheckShardSelectors: func(ctx context.Context, r *Registry, key Key) (bool, error) {
			return r.checkShardSelectors(ctx, key)
		},
		KeyFor: func(r *Registry, typ reflect.Type, spec Spec) (Key, error) {
			key, _, err := r.keyFor(typ, spec)
			return key, err
		},
		Matcher:         matcherOf,
		DetectMutations: (*Registry).detectMutations,
		ForObject: func(r *Registry, example client.Object, spec Spec, opts ...Option) (any, error) {
			return forObject(r, example, spec, opts...)
		},
		HoldObject: func(r *Registry, example client.Object, spec Spec, opts ...Option) (any, func(), error) {
			e, release, err := r.hold(reflect.TypeOf(example), spec, newRequest(opts))
			if err != nil {
				return nil, nil, err
			}
			return &Store[client.Object]{e: e}, release, nil
		},
		FieldIndex:      fieldIndexNamed,
		FieldIndexValue: namespacedValue,
		IndexOnly:       indexOnly,
		Started:         (*Registry).isStarted,
		ReleaseConsumer: (*Registry).releaseConsumer,
		WaitForKind:     (*Registry).waitForKind,
		Serve: func(ctx context.Context, r *Registry, key Key) (func(), error) {
			return r.serve(ctx, key)
		},
		WaitingForKind: (*Registry).waitingForKind,
		CheckSpec: func(r *Registry, spec Spec) error {
			_, err := spec.key(schema.GroupVersionKind{Version: "v1", Kind: "Check"}, Typed, &r.selectors)
			return err
		},
		Gate: func(store any) primary.Gated {
			if s, ok := store.(storeEntry); ok {
				if e := s.storeEntry(); e != nil {
					return e.gate
				}
			}
			return nil
		},
	})
}

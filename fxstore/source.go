package fxstore

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// Source is where stores get their objects. apiserver.NewSource connects
// them to a Kubernetes API server; fxstoretest provides an in-memory Source.
//
// A Source may also implement, for the registry to find by type assertion:
//
//   - AppliesShardSelectors(ctx, key) (bool, error): whether the API server
//     applies shard selectors to key's kind (see Spec.Shard);
//   - PlanBinds(keys []Key): told, before Start binds them at once, which
//     stores it binds;
//   - CheckList(ctx, key) error: a plain list of one of key's objects, to
//     diagnose a store that fails or does not sync without saying why.
//
// A Bind error with a SourceWide() bool method returning true is one every
// store meets alike, such as an API server away: Start reports it once.
type Source interface {
	// Bind resolves the store with key and returns how to list and watch
	// its objects. An error means the store cannot work at all (its kind is
	// not served, or it may not be listed); it should say how to fix it.
	Bind(ctx context.Context, key Key) (Binding, error)
}

// Binding connects one store to its objects.
type Binding struct {
	// ListerWatcher lists and watches exactly the objects the key selects.
	ListerWatcher cache.ListerWatcher
	// Resource names the objects in errors, such as NotFound.
	Resource schema.GroupResource
}

// shardSelectorChecker is a Source that can tell whether the API server
// applies shard selectors to the objects of a kind, for
// Registry.checkShardSelectors. apiserver.Source is one.
type shardSelectorChecker interface {
	// AppliesShardSelectors reports whether the API server applies the
	// shard selector of key (a sharded key) to key's objects.
	AppliesShardSelectors(ctx context.Context, key Key) (bool, error)
}

// bindPlanner is a Source that Registry.Start tells, before binding them
// at once, which stores it binds, such as apiserver.Source, which then
// asks the API server less.
type bindPlanner interface {
	PlanBinds(keys []Key)
}

// sourceWide is a Bind error that every store of its source meets alike.
type sourceWide interface {
	error
	SourceWide() bool
}

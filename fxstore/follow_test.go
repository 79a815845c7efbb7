package fxstore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

// A view whose parent's last hold goes moves: to another store that
// covers it, or to an informer of its own. Its reads never fail nor miss
// an object meanwhile, its handlers hear only what changed, its indexes
// stay, and the parent then stops.
func TestViewsFollowWhenTheirParentGoes(t *testing.T) {
	tests := []struct {
		name string
		// other, when set, is a store that also covers the view.
		other  *fxstore.Spec
		wantOf bool // the view moves to other
	}{
		{name: "to an informer of its own"},
		{name: "to another parent", other: &fxstore.Spec{LabelSelector: "team=x"}, wantOf: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []client.Object
			for i := range 10 {
				team := "x"
				if i%2 == 1 {
					team = "y"
				}
				objs = append(objs, testenv.ConfigMap("a", fmt.Sprintf("cm-%d", i), testenv.Labels{"team": team}))
			}
			core, logs := observer.New(zapcore.InfoLevel)
			r := fxstore.NewRegistry(clientgoscheme.Scheme, fxstore.WithLogger(zap.New(core)))
			src := fxstoretest.NewSource(clientgoscheme.Scheme, objs...)
			fxstoretest.Start(t, r, src)
			ctx := t.Context()

			parent, err := fxstore.Hold[*corev1.ConfigMap](ctx, r, fxstore.Spec{Namespace: "a"}, fxstore.WithConsumer("parent"))
			require.NoError(t, err)
			require.NoError(t, r.WaitForStore(ctx, parent.Key()))
			var other *fxstore.Held[*corev1.ConfigMap]
			if tt.other != nil {
				other, err = fxstore.Hold[*corev1.ConfigMap](ctx, r, *tt.other, fxstore.WithConsumer("other"))
				require.NoError(t, err)
				require.NoError(t, r.WaitForStore(ctx, other.Key()))
			}
			view, err := fxstore.Hold[*corev1.ConfigMap](ctx, r, fxstore.Spec{Namespace: "a", LabelSelector: "team=x"},
				fxstore.WithConsumer("view"), fxstore.WithIndex("name", byName))
			require.NoError(t, err)
			require.NoError(t, r.WaitForStore(ctx, view.Key()))
			require.Equal(t, parent.Key(), *testenv.StoreInfo(t, r, view.Key()).ViewOf)
			mirror := testenv.NewMirror()
			sub, err := view.Subscribe(mirror)
			require.NoError(t, err)
			require.NoError(t, sub.WaitForSync(ctx))

			// Changes before the move: one new, one gone, one updated. The
			// fake API server's resourceVersions count per object: the
			// update, last, is the most recent, as the move compares them.
			require.NoError(t, src.Client().Create(ctx, testenv.ConfigMap("a", "new", testenv.Labels{"team": "x"})))
			require.NoError(t, src.Client().Delete(ctx, objs[2]))
			cm := objs[0].(*corev1.ConfigMap).DeepCopy()
			require.NoError(t, src.Client().Get(ctx, client.ObjectKeyFromObject(cm), cm))
			cm.Data = map[string]string{"k": "v"}
			require.NoError(t, src.Client().Update(ctx, cm))
			want := func() map[string]string {
				var list corev1.ConfigMapList
				require.NoError(t, src.Client().List(ctx, &list, client.InNamespace("a"), client.MatchingLabels{"team": "x"}))
				return testenv.Versions(ptrs(list.Items))
			}
			require.Eventually(t, func() bool { return equalMaps(want(), mirror.Held()) }, 5*time.Second, time.Millisecond)

			// Reads while the parent goes: none fails or misses an object.
			var stop atomic.Bool
			var reads sync.WaitGroup
			var failed []string
			reads.Go(func() {
				for !stop.Load() {
					list, err := view.List()
					got, ixErr := view.ByIndex("name", "new")
					switch {
					case err != nil || ixErr != nil:
						failed = append(failed, fmt.Sprint(err, ixErr))
					case len(list) != 5 || len(got) != 1:
						failed = append(failed, fmt.Sprintf("%d objects, %d by index", len(list), len(got)))
					}
				}
			})
			parent.Release()
			require.Eventually(t, func() bool {
				return !holds(r, parent.Key())
			}, 5*time.Second, time.Millisecond, "the parent stops once its view has moved")
			stop.Store(true)
			reads.Wait()
			assert.Empty(t, failed, "reads while the view moved")

			info := testenv.StoreInfo(t, r, view.Key())
			if tt.wantOf {
				require.NotNil(t, info.ViewOf)
				assert.Equal(t, other.Key(), *info.ViewOf)
			} else {
				assert.Nil(t, info.ViewOf, "an informer of its own")
				assert.Positive(t, info.Bytes, "it holds its objects now")
			}
			assert.True(t, info.Status.Synced)
			assert.Equal(t, []string{"view"}, info.Consumers)
			assert.Equal(t, want(), mirror.Held())
			// Counted and logged, each line naming its store.
			assert.Equal(t, 1.0, testenv.Metric(t, r, "fxkube_stores_moved_total", nil))
			assert.Equal(t, 1.0, testenv.Metric(t, r, "fxkube_stores_released_total", nil))
			assert.Equal(t, 1, logs.FilterMessageSnippet("store moved").FilterField(zap.Stringer("store", view.Key())).Len())
			assert.Equal(t, 1, logs.FilterMessageSnippet("store released").FilterField(zap.Stringer("store", parent.Key())).Len())

			// It follows changes from its new backing.
			require.NoError(t, src.Client().Delete(ctx, cm))
			require.NoError(t, src.Client().Create(ctx, testenv.ConfigMap("a", "newer", testenv.Labels{"team": "x"})))
			require.Eventually(t, func() bool { return equalMaps(want(), mirror.Held()) }, 5*time.Second, time.Millisecond)
			list, err := view.List()
			require.NoError(t, err)
			assert.Equal(t, want(), testenv.Versions(list))
			got, err := view.ByIndex("name", "newer")
			require.NoError(t, err)
			assert.Len(t, got, 1)
			assert.Empty(t, mirror.Problems())
			require.NoError(t, sub.Unsubscribe())
		})
	}
}

// A view of a store asked for with For stays its view: its parent never
// goes, and its handlers are not tracked.
func TestViewsOfLastingStoresStay(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	parent, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a"})
	require.NoError(t, err)
	fxstoretest.Start(t, r, fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("a", "x", testenv.Labels{"team": "x"})))
	view, err := fxstore.Hold[*corev1.ConfigMap](t.Context(), r, fxstore.Spec{Namespace: "a", LabelSelector: "team=x"})
	require.NoError(t, err)
	require.NoError(t, r.WaitForStore(t.Context(), view.Key()))
	held, err := fxstore.Hold[*corev1.ConfigMap](t.Context(), r, fxstore.Spec{Namespace: "a"})
	require.NoError(t, err)
	held.Release()
	assert.Equal(t, parent.Key(), *testenv.StoreInfo(t, r, view.Key()).ViewOf)
}

func holds(r *fxstore.Registry, key fxstore.Key) bool {
	for _, info := range r.Stores() {
		if info.Key == key {
			return true
		}
	}
	return false
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

func byName(cm *corev1.ConfigMap) []string { return []string{cm.Name} }

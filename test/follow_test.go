package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
)

// A view whose parent is released while a writer creates, updates and
// deletes its objects. The view moves to an informer of its own. Its
// store and a subscription mirroring its events equal the API server's
// LIST at checkpoints before, during and after the move, with no event
// for an object that did not change. The parent's watch then closes.
func TestViewWhoseParentGoesUnderChurn(t *testing.T) {
	cfg := testenv.Config(t)
	ctx := t.Context()
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")
	scheme := k8sruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	for i := range 40 {
		require.NoError(t, direct.Create(ctx, testenv.ConfigMap(ns, fmt.Sprintf("cm-%d", i), testenv.Labels{"team": team(i)})))
	}
	reg := fxstore.NewRegistry(scheme, fxstore.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))))
	conn, err := connection.New(cfg, scheme)
	require.NoError(t, err)
	t.Cleanup(conn.HTTPClient.CloseIdleConnections)
	t.Cleanup(reg.Stop)
	require.NoError(t, reg.Start(ctx, apiserver.NewSource(conn.Client)))
	require.NoError(t, reg.WaitForSync(ctx))
	watches := scrapeRequests(t, cfg, "configmaps").OpenWatches

	parent, err := fxstore.Hold[*corev1.ConfigMap](ctx, reg, fxstore.Spec{LabelSelector: "team"}, fxstore.WithConsumer("parent"))
	require.NoError(t, err)
	viewSpec := fxstore.Spec{LabelSelector: "team=a", FieldSelector: "metadata.namespace=" + ns}
	view, err := fxstore.Hold[*corev1.ConfigMap](ctx, reg, viewSpec, fxstore.WithConsumer("view"), fxstore.WithIndex("name", byName))
	require.NoError(t, err)
	require.NoError(t, reg.WaitForStore(ctx, view.Key()))
	require.Equal(t, parent.Key(), *testenv.StoreInfo(t, reg, view.Key()).ViewOf)
	mirror := testenv.NewMirror()
	sub, err := view.Subscribe(mirror)
	require.NoError(t, err)
	require.NoError(t, sub.WaitForSync(ctx))

	// The writer: creates, updates (some moving objects in and out of
	// team=a) and deletes, until stopped.
	writeCtx, stopWriting := context.WithCancel(ctx)
	var writer sync.WaitGroup
	var writing sync.Mutex // held by a check, to pause the writer
	var writes int
	writer.Go(func() {
		rnd := rand.New(rand.NewPCG(1, 2))
		for n := 40; writeCtx.Err() == nil; n++ {
			writing.Lock()
			name := fmt.Sprintf("cm-%d", rnd.IntN(n))
			var err error
			switch rnd.IntN(3) {
			case 0:
				err = direct.Create(writeCtx, testenv.ConfigMap(ns, fmt.Sprintf("cm-%d", n), testenv.Labels{"team": team(n)}))
			case 1:
				var cm corev1.ConfigMap
				if err = direct.Get(writeCtx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err == nil {
					cm.Labels["team"] = team(rnd.IntN(4))
					cm.Data = map[string]string{"n": fmt.Sprint(n)}
					err = direct.Update(writeCtx, &cm)
				}
			case 2:
				err = direct.Delete(writeCtx, testenv.ConfigMap(ns, name))
			}
			writing.Unlock()
			if err == nil {
				writes++
			} else if !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) && writeCtx.Err() == nil {
				t.Errorf("write: %v", err)
				return
			}
		}
	})
	t.Cleanup(func() { stopWriting(); writer.Wait() })
	// A checkpoint pauses the writer until the view and its subscription
	// equal the API server's LIST: before the release, while the view
	// moves, and after.
	checkpoints := 0
	checkpoint := func() {
		t.Helper()
		writing.Lock()
		defer writing.Unlock()
		listEquals(t, direct, ns, view, mirror)
		checkpoints++
	}
	for range 4 {
		time.Sleep(50 * time.Millisecond) // churn before the release too
		checkpoint()
	}

	// Reads go on while the parent goes: none fails.
	var reads sync.WaitGroup
	readCtx, stopReading := context.WithCancel(ctx)
	var readErrs []error
	var readsDone int
	reads.Go(func() {
		for readCtx.Err() == nil {
			if _, err := view.List(); err != nil {
				readErrs = append(readErrs, err)
			}
			if _, err := view.ByIndex("name", "cm-0"); err != nil {
				readErrs = append(readErrs, err)
			}
			readsDone++
		}
	})
	movedAway := func() bool {
		if testenv.StoreInfo(t, reg, view.Key()).ViewOf != nil {
			return false
		}
		for _, s := range reg.Stores() {
			if s.Key == parent.Key() {
				return false
			}
		}
		return true
	}
	released := time.Now()
	parent.Release()
	for !movedAway() {
		require.Less(t, time.Since(released), 30*time.Second, "the view moves to an informer of its own and the parent goes")
		checkpoint()
	}
	moved := time.Since(released)
	stopReading()
	reads.Wait()
	require.Empty(t, readErrs)
	for range 4 {
		time.Sleep(50 * time.Millisecond) // the view follows the writer from its new informer
		checkpoint()
	}
	stopWriting()
	writer.Wait()
	listEquals(t, direct, ns, view, mirror)
	assert.Empty(t, mirror.Problems(), "events no watch of the view's own would send")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, watches+1, scrapeRequests(t, cfg, "configmaps").OpenWatches, "the view's watch; the parent's is closed")
	}, 30*time.Second, 100*time.Millisecond)
	t.Logf("moved in %v under %d writes, %d reads during the move, %d events, %d checkpoints equal to the LIST", moved, writes, readsDone, mirror.Events(), checkpoints)
}

// team spreads objects over four teams.
func team(i int) string { return string(rune('a' + i%4)) }

// listEquals checks, eventually, that store and mirror both hold what the
// API server lists of the view's objects.
func listEquals(t *testing.T, direct client.Client, ns string, store *fxstore.Held[*corev1.ConfigMap], mirror *testenv.Mirror) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var list corev1.ConfigMapList
		require.NoError(c, direct.List(t.Context(), &list, client.InNamespace(ns), client.MatchingLabels{"team": "a"}))
		want := map[string]string{}
		for _, cm := range list.Items {
			want[client.ObjectKeyFromObject(&cm).String()] = cm.ResourceVersion
		}
		objs, err := store.List()
		require.NoError(c, err)
		assert.Equal(c, want, testenv.Versions(objs), "the store")
		assert.Equal(c, want, mirror.Held(), "the subscription")
	}, 10*time.Second, 5*time.Millisecond)
}

package test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/internal/workload"
)

// Under random churn through the API server, a store's Pods share the
// parts replicas repeat, and each equals what the API server returns.
// Once every Pod is deleted, the store holds nothing: no part either.
// Listed and watched through the connection's client, a store takes
// what it decodes; through a REST client of its own
// (apiserver.WithREST), it decodes what it has not seen.
func TestSharedStoreMatchesTheAPIServer(t *testing.T) {
	tests := []struct {
		name string
		give func(conn *connection.Connection) []apiserver.SourceOption
	}{
		{"client", func(*connection.Connection) []apiserver.SourceOption { return nil }},
		{"decoding", func(conn *connection.Connection) []apiserver.SourceOption {
			return []apiserver.SourceOption{apiserver.WithREST(conn.Config, conn.HTTPClient)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testSharedStore(t, tt.give) })
	}
}

func testSharedStore(t *testing.T, opts func(conn *connection.Connection) []apiserver.SourceOption) {
	ctx := t.Context()
	cfg := testenv.Config(t)
	scheme := k8sruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	ns := &corev1.Namespace{}
	ns.GenerateName = "sharing-"
	require.NoError(t, direct.Create(ctx, ns))

	reg := fxstore.NewRegistry(scheme, fxstore.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))))
	pods, err := fxstore.For[*corev1.Pod](reg, fxstore.Spec{Namespace: ns.Name})
	require.NoError(t, err)
	conn, err := connection.New(cfg, scheme)
	require.NoError(t, err)
	t.Cleanup(conn.HTTPClient.CloseIdleConnections)
	t.Cleanup(reg.Stop)
	require.NoError(t, reg.Start(ctx, apiserver.NewSource(conn.Client, opts(conn)...)))
	require.NoError(t, reg.WaitForSync(ctx))

	rng := rand.New(rand.NewPCG(22, 1))
	deployments := make([]*appsv1.Deployment, 4)
	for i := range deployments {
		deployments[i] = workload.Deployment(ns.Name, i, 10)
	}
	newPod := func(d, r int) *corev1.Pod {
		p := workload.Pod(deployments[d], r)
		p.Status = corev1.PodStatus{} // set by the status subresource, not on create
		p.ResourceVersion, p.UID = "", ""
		return p
	}
	for step := range 200 {
		d, r := rng.IntN(len(deployments)), rng.IntN(15)
		p := newPod(d, r)
		switch rng.IntN(4) {
		case 0, 1:
			err = direct.Create(ctx, p)
		case 2:
			current := &corev1.Pod{}
			if err = direct.Get(ctx, client.ObjectKeyFromObject(p), current); err == nil {
				metav1.SetMetaDataAnnotation(&current.ObjectMeta, "example.com/step", fmt.Sprint(step))
				err = direct.Update(ctx, current)
			}
		case 3:
			err = direct.Delete(ctx, p)
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			require.NoError(t, err, "step %d", step)
		}
	}

	var want corev1.PodList
	require.NoError(t, direct.List(ctx, &want, client.InNamespace(ns.Name)))
	require.NotEmpty(t, want.Items)
	require.Eventually(t, func() bool {
		got, err := pods.List()
		if err != nil || len(got) != len(want.Items) {
			return false
		}
		for i := range want.Items {
			g, err := pods.Get(ns.Name, want.Items[i].Name)
			if err != nil || g.ResourceVersion != want.Items[i].ResourceVersion {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the store catches up with the API server")

	byDeployment := map[string][]*corev1.Pod{}
	for i := range want.Items {
		w := want.Items[i].DeepCopy()
		w.ManagedFields = nil // stores strip them by default
		got, err := pods.Get(ns.Name, w.Name)
		require.NoError(t, err)
		if !equality.Semantic.DeepEqual(w, got) {
			assert.Equal(t, w, got, "%s equals the API server's", w.Name)
		}
		app := got.Labels["app.kubernetes.io/name"]
		byDeployment[app] = append(byDeployment[app], got)
	}
	shared := 0
	for app, replicas := range byDeployment {
		for _, p := range replicas[1:] {
			// Containers differ (each mounts its Pod's token volume);
			// what they repeat is shared.
			if unsafe.SliceData(p.Spec.Containers[0].Env) == unsafe.SliceData(replicas[0].Spec.Containers[0].Env) {
				shared++
			} else {
				t.Errorf("%s: %s and %s hold their containers' env apart", app, p.Name, replicas[0].Name)
			}
		}
	}
	t.Logf("%d Pods of %d Deployments; %d share their first replica's env", len(want.Items), len(byDeployment), shared)
	assert.Positive(t, shared)

	// A part every replica shares, watched weakly.
	var first *corev1.Pod
	for _, replicas := range byDeployment {
		first = replicas[0]
		break
	}
	env := weak.Make(&first.Spec.Containers[0].Env[0])
	require.NoError(t, direct.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns.Name), client.GracePeriodSeconds(0)))
	require.Eventually(t, func() bool {
		n, err := pods.Count()
		return err == nil && n == 0
	}, 30*time.Second, 50*time.Millisecond, "the store sees every Pod deleted")
	require.Eventually(t, func() bool {
		runtime.GC()
		info := testenv.StoreInfo(t, reg, pods.Key())
		return info.Bytes == 0 && env.Value() == nil
	}, 10*time.Second, 50*time.Millisecond, "no part of a deleted Pod is held")
}

package fxkube_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/fxstore"
)

// This file is the README's "A module", compiled and tested.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Module annotates each ConfigMap labelled app=web with how many such
// ConfigMaps its namespace holds, reading them from a store shared with
// every module asking for the same spec.
var Module = fx.Module("webcount", fxcontroller.Provide(newController))

const countAnnotation = "example.com/web-configmaps"

func newController(stores *fxstore.Registry, c client.Client) (*fxcontroller.Controller, error) {
	// Equivalent selectors ("app=web", "app==web", "app in (web)") share one store.
	configMaps, err := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{LabelSelector: "app=web"})
	if err != nil {
		return nil, err // names the store, the bad input and this function; fails fx.New
	}
	return fxcontroller.New("webcount", configMaps, reconcile.Func(
		func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			cm, err := configMaps.Get(req.Namespace, req.Name)
			if err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			all, err := configMaps.List(client.InNamespace(req.Namespace))
			if err != nil {
				return reconcile.Result{}, err
			}
			count := strconv.Itoa(len(all))
			if cm.Annotations[countAnnotation] == count {
				return reconcile.Result{}, nil
			}
			// Objects from stores are shared and read-only: copy, then change.
			cm = cm.DeepCopy()
			metav1.SetMetaDataAnnotation(&cm.ObjectMeta, countAnnotation, count)
			return reconcile.Result{}, c.Update(ctx, cm)
		}),
		fxcontroller.Writes(corev1.Resource("configmaps"), "update"))
}

func TestReadmeModule(t *testing.T) {
	web := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": "web"}}}
	}
	a := fxcontrollertest.New(t, Module, web("a"), web("b"))
	_, err := a.Reconcile(t.Context(), "webcount", client.ObjectKey{Namespace: "default", Name: "a"})
	require.NoError(t, err)

	var got corev1.ConfigMap
	require.NoError(t, a.Client().Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "a"}, &got))
	assert.Equal(t, "2", got.Annotations[countAnnotation])
}

// TestReadmeShowsThisFile keeps the README's module in step with the code
// above, which the compiler and TestReadmeModule check.
func TestReadmeShowsThisFile(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	self, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	src := string(self)
	module := src[strings.Index(src, "// Module annotates"):strings.Index(src, "func TestReadmeModule")]
	assert.Contains(t, string(readme), strings.TrimSpace(module), "README.md's \"A module\" differs from example_test.go")
}

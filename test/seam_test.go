package test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// Requests made after start go through what backs the store: an index
// asked of a view is the view's own, on its parent's informer, even where
// the parent has an index of the same name; an option a started store
// cannot honour fails, naming the store, the option and the fix.
func TestRequestsAfterStartGoThroughTheBacking(t *testing.T) {
	cfg := testenv.Config(t)
	ctx := t.Context()
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")
	for name, labels := range map[string]map[string]string{
		"web-1": {"team": "a", "app": "x"},
		"web-2": {"team": "b", "app": "x"},
		"db":    {"team": "a", "app": "y"},
	} {
		_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	byTeam := func(cm *corev1.ConfigMap) []string { return []string{cm.Labels["team"]} }
	byApp := func(cm *corev1.ConfigMap) []string { return []string{cm.Labels["app"]} }

	// 1. All ConfigMaps, indexed by team under "label", and the
	// namespace's, which becomes a view of them.
	var (
		r   *fxstore.Registry
		all *fxstore.Store[*corev1.ConfigMap]
	)
	app := testenv.App(t, cfg, lifecycle.Config{}, zaptest.NewLogger(t),
		fx.Invoke(func(reg *fxstore.Registry) (err error) {
			r = reg
			if all, err = fxstore.For[*corev1.ConfigMap](reg, fxstore.Spec{}, fxstore.WithIndex("label", byTeam)); err != nil {
				return err
			}
			_, err = fxstore.For[*corev1.ConfigMap](reg, fxstore.Spec{Namespace: ns})
			return err
		}),
	)
	app.RequireStart()
	defer app.RequireStop()

	// 2. After start, the namespace's store again, indexed by app under
	// the same name.
	inNS, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: ns}, fxstore.WithIndex("label", byApp))
	require.NoError(t, err)
	info := testenv.StoreInfo(t, r, inNS.Key())
	require.NotNil(t, info.ViewOf, "the namespace's store is a view")
	require.Equal(t, all.Key(), *info.ViewOf)
	require.Equal(t, []string{"label"}, info.Indexes)

	// 3. Its "label" index is its own: by app.
	got, err := inNS.ByIndex("label", "x")
	require.NoError(t, err)
	require.Equal(t, []string{"web-1", "web-2"}, names(got))
	got, err = inNS.ByIndex("label", "a")
	require.NoError(t, err)
	require.Empty(t, got, "no ConfigMap has app=a")
	// The parent's is still by team.
	got, err = all.ByIndex("label", "a")
	require.NoError(t, err)
	require.Equal(t, []string{"db", "web-1"}, names(inNamespace(got, ns)))

	for _, tt := range []struct {
		name string
		spec fxstore.Spec
		give fxstore.Option
		want string
	}{
		{
			name: "an informer of its own for a view",
			spec: fxstore.Spec{Namespace: ns},
			give: fxstore.WithOwnInformer(),
			want: "fxstore.WithOwnInformer(): the store has started as a view of ConfigMap/v1 (all namespaces); give the option in a constructor, before the app starts",
		},
		{
			name: "no sharing for a view",
			spec: fxstore.Spec{Namespace: ns},
			give: fxstore.WithoutSharing(),
			want: "fxstore.WithoutSharing(): the store has started as a view of ConfigMap/v1 (all namespaces); give the option in a constructor",
		},
		{
			name: "no sharing for a store that shares",
			spec: fxstore.Spec{},
			give: fxstore.WithoutSharing(),
			want: "fxstore.WithoutSharing(): the store has started, its objects sharing their parts; give the option in a constructor",
		},
		{
			name: "bytes for a store of decoded objects",
			spec: fxstore.Spec{},
			give: fxstore.HeldAsBytes(),
			want: "fxstore.HeldAsBytes(): the store has started, holding its objects decoded; give the option in a constructor",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := testenv.StoreInfo(t, r, all.Key())
			_, err := fxstore.For[*corev1.ConfigMap](r, tt.spec, tt.give)
			require.ErrorContains(t, err, tt.want)
			key := all.Key()
			if tt.spec.Namespace != "" {
				key = inNS.Key()
			}
			require.ErrorContains(t, err, fmt.Sprintf("store %s requested by ", key), "the error names the store")
			// Nothing is lost: the stores serve as before, with no request
			// more.
			got, err := inNS.List()
			require.NoError(t, err)
			require.Equal(t, []string{"db", "web-1", "web-2"}, names(got))
			require.Equal(t, before.Consumers, testenv.StoreInfo(t, r, all.Key()).Consumers)
		})
	}
}

// names returns the objects' names, sorted.
func names(objs []*corev1.ConfigMap) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Name
	}
	slices.Sort(out)
	return out
}

// inNamespace returns the objects in ns.
func inNamespace(objs []*corev1.ConfigMap, ns string) []*corev1.ConfigMap {
	return slices.DeleteFunc(slices.Clone(objs), func(o *corev1.ConfigMap) bool { return o.Namespace != ns })
}

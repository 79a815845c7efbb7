package mirror_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/modules/mirror"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The namespaces of every test: sources live in "src".
var namespaces = []client.Object{namespace("src"), namespace("a"), namespace("b"), namespace("c")}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// option changes an object made by configMap or secret.
type option func(client.Object)

// source makes the object a source mirrored to targets.
func source(targets string) option {
	return func(o client.Object) {
		label(mirror.SourceLabel, "true")(o)
		annotate(mirror.TargetsAnnotation, targets)(o)
	}
}

// copyOf marks the object as a copy of src ("namespace/name").
func copyOf(src string) option {
	return func(o client.Object) {
		label(mirror.CopyLabel, "true")(o)
		annotate(mirror.CopyOfAnnotation, src)(o)
	}
}

func label(k, v string) option {
	return func(o client.Object) { o.SetLabels(with(o.GetLabels(), k, v)) }
}

func annotate(k, v string) option {
	return func(o client.Object) { o.SetAnnotations(with(o.GetAnnotations(), k, v)) }
}

func with(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

func immutable(o client.Object) {
	switch o := o.(type) {
	case *corev1.ConfigMap:
		o.Immutable = new(true)
	case *corev1.Secret:
		o.Immutable = new(true)
	}
}

// configMap is the ConfigMap namespace/settings with data "k=v,...".
func configMap(namespace, data string, opts ...option) *corev1.ConfigMap {
	cm := testenv.ConfigMap(namespace, "settings", testenv.Data(parse(data)))
	for _, o := range opts {
		o(cm)
	}
	return cm
}

// secret is the Secret namespace/token of type typ with data "k=v,...".
func secret(namespace string, typ corev1.SecretType, data string, opts ...option) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "token"}, Type: typ}
	for k, v := range parse(data) {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[k] = []byte(v)
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func parse(data string) map[string]string {
	if data == "" {
		return nil
	}
	m := map[string]string{}
	for kv := range strings.SplitSeq(data, ",") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// state describes every ConfigMap and Secret the client holds, by
// "namespace/name": its data, and what it is a copy of.
func state(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	describe := func(o client.Object, content string) {
		if o.GetLabels()[mirror.CopyLabel] == "true" {
			content += " (copy of " + o.GetAnnotations()[mirror.CopyOfAnnotation] + ")"
		}
		out[client.ObjectKeyFromObject(o).String()] = content
	}
	var cms corev1.ConfigMapList
	require.NoError(t, c.List(t.Context(), &cms))
	for _, cm := range cms.Items {
		describe(&cm, join(cm.Data))
	}
	var secrets corev1.SecretList
	require.NoError(t, c.List(t.Context(), &secrets))
	for _, s := range secrets.Items {
		data := map[string]string{}
		for k, v := range s.Data {
			data[k] = string(v)
		}
		describe(&s, string(s.Type)+" "+join(data))
	}
	return out
}

func join(data map[string]string) string {
	var kvs []string
	for _, k := range slices.Sorted(maps.Keys(data)) {
		kvs = append(kvs, k+"="+data[k])
	}
	return strings.Join(kvs, ",")
}

// eventStrings describes the events app recorded, with their related
// object, and checks that controller recorded them.
func eventStrings(t *testing.T, app *fxcontrollertest.App, controller string) []string {
	t.Helper()
	var out []string
	for _, e := range app.Events() {
		assert.Equal(t, controller, e.Controller)
		s := e.String()
		if r := e.Related; r != nil {
			s += fmt.Sprintf(" [%s %s]", r.Kind, strings.TrimPrefix(r.Namespace+"/"+r.Name, "/"))
		}
		out = append(out, s)
	}
	return out
}

func TestConfigMaps(t *testing.T) {
	const key = "src/settings"
	tests := []struct {
		name       string
		give       []client.Object
		want       map[string]string // state afterwards, sources included
		wantEvents []string          // in any order
	}{
		{
			name: "copies to each target",
			give: []client.Object{configMap("src", "color=blue", source("a,b"))},
			want: map[string]string{
				"src/settings": "color=blue",
				"a/settings":   "color=blue (copy of src/settings)",
				"b/settings":   "color=blue (copy of src/settings)",
			},
			wantEvents: []string{
				"Normal CopyCreated ConfigMap src/settings: created a copy in namespace a [ConfigMap a/settings]",
				"Normal CopyCreated ConfigMap src/settings: created a copy in namespace b [ConfigMap b/settings]",
			},
		},
		{
			name: "copies binary data",
			give: []client.Object{func() client.Object {
				cm := configMap("src", "", source("a"))
				cm.BinaryData = map[string][]byte{"bin": {0, 1}}
				return cm
			}()},
			want: map[string]string{"src/settings": "", "a/settings": " (copy of src/settings)"},
			wantEvents: []string{
				"Normal CopyCreated ConfigMap src/settings: created a copy in namespace a [ConfigMap a/settings]",
			},
		},
		{
			name: "propagates updates",
			give: []client.Object{
				configMap("src", "color=red", source("a,b")),
				configMap("a", "color=blue", copyOf(key)),
				configMap("b", "color=blue,size=xl", copyOf(key), label("team", "b")),
			},
			want: map[string]string{
				"src/settings": "color=red",
				"a/settings":   "color=red (copy of src/settings)",
				"b/settings":   "color=red (copy of src/settings)",
			},
			wantEvents: []string{
				"Normal CopyUpdated ConfigMap src/settings: updated the copy in namespace a [ConfigMap a/settings]",
				"Normal CopyUpdated ConfigMap src/settings: updated the copy in namespace b [ConfigMap b/settings]",
			},
		},
		{
			name: "leaves copies up to date alone",
			give: []client.Object{
				configMap("src", "color=blue", source("a")),
				configMap("a", "color=blue", copyOf(key)),
			},
			want: map[string]string{
				"src/settings": "color=blue",
				"a/settings":   "color=blue (copy of src/settings)",
			},
		},
		{
			name: "recreates an immutable copy",
			give: []client.Object{
				configMap("src", "color=red", source("a")),
				configMap("a", "color=blue", copyOf(key), immutable),
			},
			want: map[string]string{
				"src/settings": "color=red",
				"a/settings":   "color=red (copy of src/settings)",
			},
			wantEvents: []string{"Normal CopyCreated ConfigMap src/settings: created a copy in namespace a [ConfigMap a/settings]"},
		},
		{
			name: "deletes the copy of a namespace removed from the list",
			give: []client.Object{
				configMap("src", "color=blue", source("a")),
				configMap("a", "color=blue", copyOf(key)),
				configMap("b", "color=blue", copyOf(key)),
			},
			want: map[string]string{
				"src/settings": "color=blue",
				"a/settings":   "color=blue (copy of src/settings)",
			},
			wantEvents: []string{"Normal CopyDeleted ConfigMap src/settings: deleted the copy in namespace b [ConfigMap b/settings]"},
		},
		{
			name: "deletes copies when the label is removed",
			give: []client.Object{
				configMap("src", "color=blue", annotate(mirror.TargetsAnnotation, "a,b")),
				configMap("a", "color=blue", copyOf(key)),
				configMap("b", "color=blue", copyOf(key)),
			},
			want: map[string]string{"src/settings": "color=blue"},
			wantEvents: []string{
				"Normal CopyDeleted ConfigMap src/settings: deleted the copy in namespace a [ConfigMap a/settings]",
				"Normal CopyDeleted ConfigMap src/settings: deleted the copy in namespace b [ConfigMap b/settings]",
			},
		},
		{
			name: "deletes copies when the label is not true",
			give: []client.Object{
				configMap("src", "color=blue", source("a"), label(mirror.SourceLabel, "false")),
				configMap("a", "color=blue", copyOf(key)),
			},
			want:       map[string]string{"src/settings": "color=blue"},
			wantEvents: []string{"Normal CopyDeleted ConfigMap src/settings: deleted the copy in namespace a [ConfigMap a/settings]"},
		},
		{
			name: "deletes copies when the source is gone",
			give: []client.Object{
				configMap("a", "color=blue", copyOf(key)),
				configMap("b", "color=blue", copyOf(key)),
			},
			want: map[string]string{},
		},
		{
			name: "keeps copies of other sources",
			give: []client.Object{
				configMap("a", "color=blue", copyOf("elsewhere/settings")),
				configMap("b", "color=blue", annotate(mirror.CopyOfAnnotation, key)), // not labelled a copy
			},
			want: map[string]string{
				"a/settings": "color=blue (copy of elsewhere/settings)",
				"b/settings": "color=blue",
			},
		},
		{
			name: "never overwrites an object that is not its copy",
			give: []client.Object{
				configMap("src", "color=blue", source("a,b,c")),
				configMap("a", "color=mine"),
				configMap("b", "color=theirs", copyOf("elsewhere/settings")),
			},
			want: map[string]string{
				"src/settings": "color=blue",
				"a/settings":   "color=mine",
				"b/settings":   "color=theirs (copy of elsewhere/settings)",
				"c/settings":   "color=blue (copy of src/settings)",
			},
			wantEvents: []string{
				"Warning CopyConflict ConfigMap src/settings: namespace a already holds a ConfigMap named settings that is not a copy of this one; leaving it alone [ConfigMap a/settings]",
				"Warning CopyConflict ConfigMap src/settings: namespace b already holds a ConfigMap named settings that is not a copy of this one; leaving it alone [ConfigMap b/settings]",
				"Normal CopyCreated ConfigMap src/settings: created a copy in namespace c [ConfigMap c/settings]",
			},
		},
		{
			name: "never deletes an object that is not its copy",
			give: []client.Object{
				configMap("src", "color=blue", annotate(mirror.TargetsAnnotation, "a")),
				configMap("a", "color=mine"),
			},
			want: map[string]string{"src/settings": "color=blue", "a/settings": "color=mine"},
		},
		{
			name: "never deletes the source marked as a copy of itself",
			give: []client.Object{configMap("src", "color=blue", copyOf(key))},
			want: map[string]string{"src/settings": "color=blue (copy of src/settings)"},
		},
		{
			name: "ignores malformed entries",
			give: []client.Object{configMap("src", "color=blue", source(" a,, Not_A_Namespace ,src,a,b "))},
			want: map[string]string{
				"src/settings": "color=blue",
				"a/settings":   "color=blue (copy of src/settings)",
				"b/settings":   "color=blue (copy of src/settings)",
			},
			wantEvents: []string{
				`Warning InvalidTargets ConfigMap src/settings: ignoring entries of fxkube.io/mirror-to: empty entry; "Not_A_Namespace" is not a namespace name: ` +
					validation.IsDNS1123Label("Not_A_Namespace")[0] + `; "src" is the source's own namespace`,
				"Normal CopyCreated ConfigMap src/settings: created a copy in namespace a [ConfigMap a/settings]",
				"Normal CopyCreated ConfigMap src/settings: created a copy in namespace b [ConfigMap b/settings]",
			},
		},
		{
			name: "reports a source without targets",
			give: []client.Object{configMap("src", "color=blue", label(mirror.SourceLabel, "true"))},
			want: map[string]string{"src/settings": "color=blue"},
			wantEvents: []string{
				"Warning NoTargets ConfigMap src/settings: labelled fxkube.io/mirror=true but fxkube.io/mirror-to names no namespace; list them, as in fxkube.io/mirror-to: ns-a,ns-b",
			},
		},
		{
			name: "reports a target namespace that does not exist",
			give: []client.Object{configMap("src", "color=blue", source("missing,a"))},
			want: map[string]string{
				"src/settings": "color=blue",
				"a/settings":   "color=blue (copy of src/settings)",
			},
			wantEvents: []string{
				"Warning NamespaceNotFound ConfigMap src/settings: namespace missing does not exist or is being deleted; the copy will be made once it exists [Namespace missing]",
				"Normal CopyCreated ConfigMap src/settings: created a copy in namespace a [ConfigMap a/settings]",
			},
		},
		{
			name: "reports a target namespace being deleted",
			give: []client.Object{
				configMap("src", "color=blue", source("going")),
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
					Name: "going", DeletionTimestamp: &metav1.Time{Time: time.Now()}, Finalizers: []string{"kubernetes"},
				}},
			},
			want: map[string]string{"src/settings": "color=blue"},
			wantEvents: []string{
				"Warning NamespaceNotFound ConfigMap src/settings: namespace going does not exist or is being deleted; the copy will be made once it exists [Namespace going]",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := fxcontrollertest.New(t, mirror.Module, append(slices.Clone(namespaces), tt.give...)...)
			_, err := app.Reconcile(t.Context(), mirror.ConfigMapsController, client.ObjectKey{Namespace: "src", Name: "settings"})
			require.NoError(t, err)
			assert.Equal(t, tt.want, state(t, app.Client()))
			assert.ElementsMatch(t, tt.wantEvents, eventStrings(t, app, mirror.ConfigMapsController))
		})
	}
}

func TestSecrets(t *testing.T) {
	const key = "src/token"
	tests := []struct {
		name       string
		give       []client.Object
		want       map[string]string
		wantEvents []string
	}{
		{
			name: "copies data and type",
			give: []client.Object{secret("src", corev1.SecretTypeBasicAuth, "username=u,password=p", source("a"))},
			want: map[string]string{
				"src/token": "kubernetes.io/basic-auth password=p,username=u",
				"a/token":   "kubernetes.io/basic-auth password=p,username=u (copy of src/token)",
			},
			wantEvents: []string{"Normal CopyCreated Secret src/token: created a copy in namespace a [Secret a/token]"},
		},
		{
			name: "propagates updates",
			give: []client.Object{
				secret("src", corev1.SecretTypeOpaque, "k=new", source("a")),
				secret("a", corev1.SecretTypeOpaque, "k=old", copyOf(key)),
			},
			want: map[string]string{
				"src/token": "Opaque k=new",
				"a/token":   "Opaque k=new (copy of src/token)",
			},
			wantEvents: []string{"Normal CopyUpdated Secret src/token: updated the copy in namespace a [Secret a/token]"},
		},
		{
			name: "recreates a copy of another type",
			give: []client.Object{
				secret("src", corev1.SecretTypeBasicAuth, "username=u", source("a")),
				secret("a", corev1.SecretTypeOpaque, "username=u", copyOf(key)),
			},
			want: map[string]string{
				"src/token": "kubernetes.io/basic-auth username=u",
				"a/token":   "kubernetes.io/basic-auth username=u (copy of src/token)",
			},
			wantEvents: []string{"Normal CopyCreated Secret src/token: created a copy in namespace a [Secret a/token]"},
		},
		{
			name: "deletes copies when the source is gone",
			give: []client.Object{
				secret("a", corev1.SecretTypeOpaque, "k=v", copyOf(key)),
				secret("b", corev1.SecretTypeOpaque, "k=v"),
			},
			want: map[string]string{"b/token": "Opaque k=v"},
		},
		{
			name: "never overwrites an object that is not its copy",
			give: []client.Object{
				secret("src", corev1.SecretTypeOpaque, "k=v", source("a")),
				secret("a", corev1.SecretTypeOpaque, "k=mine"),
			},
			want: map[string]string{"src/token": "Opaque k=v", "a/token": "Opaque k=mine"},
			wantEvents: []string{
				"Warning CopyConflict Secret src/token: namespace a already holds a Secret named token that is not a copy of this one; leaving it alone [Secret a/token]",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := fxcontrollertest.New(t, mirror.Module, append(slices.Clone(namespaces), tt.give...)...)
			_, err := app.Reconcile(t.Context(), mirror.SecretsController, client.ObjectKey{Namespace: "src", Name: "token"})
			require.NoError(t, err)
			assert.Equal(t, tt.want, state(t, app.Client()))
			assert.ElementsMatch(t, tt.wantEvents, eventStrings(t, app, mirror.SecretsController))
		})
	}
}

// Running, the controllers follow every change that matters to a source:
// the source's own, its copies', the objects in its way and its target
// namespaces'.
func TestControllersFollowChanges(t *testing.T) {
	var src *fxstoretest.Source
	app := fxtest.New(t,
		fxstoretest.Module(
			namespace("src"), namespace("a"), namespace("b"),
			// A copy whose source was deleted while the app was down.
			configMap("a", "color=old", copyOf("src/gone")),
			// In the way of the copy to b.
			configMap("b", "color=mine"),
		),
		fxcontrollertest.Module,
		mirror.Module,
		fx.Populate(&src),
	)
	app.RequireStart()
	defer app.RequireStop()
	c := src.Client()
	ctx := t.Context()
	eventually := func(msg string, want map[string]string) {
		t.Helper()
		var got map[string]string
		if !assert.Eventually(t, func() bool {
			got = state(t, c)
			return assert.ObjectsAreEqual(want, got)
		}, 5*time.Second, 10*time.Millisecond) {
			t.Fatalf("%s: got %v, want %v", msg, got, want)
		}
	}

	eventually("orphaned copy deleted at start", map[string]string{"b/settings": "color=mine"})

	require.NoError(t, c.Create(ctx, configMap("src", "color=blue", source("a,b,late"))))
	eventually("copy made, object in the way left alone", map[string]string{
		"src/settings": "color=blue",
		"a/settings":   "color=blue (copy of src/settings)",
		"b/settings":   "color=mine",
	})

	require.NoError(t, c.Delete(ctx, configMap("b", "")))
	eventually("copy made once the object in the way is gone", map[string]string{
		"src/settings": "color=blue",
		"a/settings":   "color=blue (copy of src/settings)",
		"b/settings":   "color=blue (copy of src/settings)",
	})

	require.NoError(t, c.Delete(ctx, configMap("a", "")))
	eventually("deleted copy made again", map[string]string{
		"src/settings": "color=blue",
		"a/settings":   "color=blue (copy of src/settings)",
		"b/settings":   "color=blue (copy of src/settings)",
	})

	require.NoError(t, c.Create(ctx, namespace("late")))
	eventually("copy made once its namespace exists", map[string]string{
		"src/settings":  "color=blue",
		"a/settings":    "color=blue (copy of src/settings)",
		"b/settings":    "color=blue (copy of src/settings)",
		"late/settings": "color=blue (copy of src/settings)",
	})

	var cm corev1.ConfigMap
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "a", Name: "settings"}, &cm))
	cm.Data["color"] = "tampered"
	require.NoError(t, c.Update(ctx, &cm))
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "src", Name: "settings"}, &cm))
	cm.Data["color"] = "red"
	cm.Annotations[mirror.TargetsAnnotation] = "a,late"
	require.NoError(t, c.Update(ctx, &cm))
	eventually("copy restored, update propagated, dropped target deleted", map[string]string{
		"src/settings":  "color=red",
		"a/settings":    "color=red (copy of src/settings)",
		"late/settings": "color=red (copy of src/settings)",
	})

	require.NoError(t, c.Delete(ctx, &cm))
	eventually("source deleted", map[string]string{})
}

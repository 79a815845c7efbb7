package reliability

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/modules/mirror"
	"github.com/fxkube/fxkube/modules/rollout"
)

var noop = reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })

// gadget is a Kubernetes object type no scheme knows.
type gadget struct{ corev1.ConfigMap }

// configMapsWith is a module named module whose controller, named name, is
// of the ConfigMaps spec selects; opts add to the store request.
func configMapsWith(module, name string, spec fxstore.Spec, opts ...fxstore.Option) fx.Option {
	return fx.Module(module, fxcontroller.Provide(func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
		cms, err := fxstore.For[*corev1.ConfigMap](r, spec, opts...)
		if err != nil {
			return nil, err
		}
		return fxcontroller.New(name, cms, noop)
	}))
}

func byApp(cm *corev1.ConfigMap) []string  { return []string{cm.Labels["app"]} }
func byTier(cm *corev1.ConfigMap) []string { return []string{cm.Labels["tier"]} }
func ignoreAll(*corev1.ConfigMap) []string { return nil }

// TestBadDeclarations builds apps, with the example modules, through fx.New
// and starts them, with one bad declaration each: each fails with an error
// that names what is wrong and who declared it, and none panics. Selectors
// written differently but equivalent are not an error: they share a store.
func TestBadDeclarations(t *testing.T) {
	notServed := schema.GroupVersionKind{Group: "nope.fxkube.io", Version: "v1", Kind: "Nope"}
	tests := []struct {
		name string
		give fx.Option
		// wantErr are parts of the error of fx.New, or of Start when
		// atStart; none means the app starts.
		wantErr []string
		atStart bool
		// check, if set, looks at the app's registry.
		check func(t *testing.T, r *fxstore.Registry)
	}{
		{
			name:    "invalid label selector",
			give:    configMapsWith("bad", "bad", fxstore.Spec{LabelSelector: "app in (web"}),
			wantErr: []string{`store ConfigMap/v1 (all namespaces, labels "app in (web") requested by reliability.configMapsWith`, "invalid label selector"},
		},
		{
			name:    "label selector with a control character",
			give:    configMapsWith("bad", "bad", fxstore.Spec{LabelSelector: "app=web,\x00tier=db"}),
			wantErr: []string{"invalid label selector", `control character '\x00'`},
		},
		{
			name:    "invalid field selector",
			give:    configMapsWith("bad", "bad", fxstore.Spec{FieldSelector: "metadata.name"}),
			wantErr: []string{`invalid field selector "metadata.name"`},
		},
		{
			name:    "field selector on a field that is no path",
			give:    configMapsWith("bad", "bad", fxstore.Spec{FieldSelector: "metadata name=x"}),
			wantErr: []string{`field "metadata name" is not a field path`},
		},
		{
			name: "equivalent selectors written differently",
			give: fx.Options(
				configMapsWith("a", "a", fxstore.Spec{LabelSelector: "app=web,tier in (front)"}),
				configMapsWith("b", "b", fxstore.Spec{LabelSelector: " tier==front , app = web "}),
				configMapsWith("c", "c", fxstore.Spec{LabelSelector: "app in (web),tier=front,app=web"}),
			),
			check: func(t *testing.T, r *fxstore.Registry) {
				var keys []string
				for _, info := range r.Stores() {
					if info.Key.LabelSelector != "" {
						keys = append(keys, info.Key.String())
					}
				}
				assert.Equal(t, []string{`ConfigMap/v1 (all namespaces, labels "app=web,tier=front")`}, keys, "one store for all three")
			},
		},
		{
			name:    "invalid namespace",
			give:    configMapsWith("bad", "bad", fxstore.Spec{Namespace: "Not_A_Namespace"}),
			wantErr: []string{`invalid namespace "Not_A_Namespace"`},
		},
		{
			name: "type no scheme knows",
			give: fx.Module("bad", fxcontroller.Provide(func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
				s, err := fxstore.For[*gadget](r, fxstore.Spec{})
				if err != nil {
					return nil, err
				}
				return fxcontroller.New("bad", s, noop)
			})),
			wantErr: []string{"type *reliability.gadget is not in the scheme; register its package with fxstore.AddToScheme"},
		},
		{
			name: "unstructured store without a kind",
			give: fx.Module("bad", fxcontroller.Provide(func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
				s, err := fxstore.For[*unstructured.Unstructured](r, fxstore.Spec{})
				if err != nil {
					return nil, err
				}
				return fxcontroller.New("bad", s, noop)
			})),
			wantErr: []string{"kind and version are required; set Spec.Kind"},
		},
		{
			name: "kind the API server does not serve",
			give: fx.Module("bad", fxcontroller.Provide(func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
				s, err := fxstore.For[*unstructured.Unstructured](r, fxstore.Spec{Kind: notServed})
				if err != nil {
					return nil, err
				}
				return fxcontroller.New("bad", s, noop)
			})),
			atStart: true,
			wantErr: []string{"store Nope.nope.fxkube.io/v1 (all namespaces, unstructured): kind not served by the API server; is the CRD installed?"},
		},
		{
			name: "conflicting indexes",
			give: fx.Options(
				configMapsWith("a", "a", fxstore.Spec{}, fxstore.WithIndex("by-label", byApp)),
				configMapsWith("b", "b", fxstore.Spec{}, fxstore.WithIndex("by-label", byTier)),
			),
			wantErr: []string{`index "by-label" is already defined with another function; give different indexes different names`},
		},
		{
			name: "the mirror module's index names taken by another function",
			give: fx.Options(
				configMapsWith("a", "a", fxstore.Spec{}, fxstore.WithIndex("mirror.copies", ignoreAll)),
				mirror.Module,
			),
			wantErr: []string{`index "mirror.copies" is already defined with another function`},
		},
		{
			name: "duplicate controller names",
			give: fx.Options(
				configMapsWith("a", "same", fxstore.Spec{}),
				configMapsWith("b", "same", fxstore.Spec{Namespace: "other"}),
			),
			wantErr: []string{`controller name "same" is used by both`, "give each controller of the app its own name"},
		},
		{
			name:    "a controller named as the example module's",
			give:    fx.Options(configMapsWith("a", "rollout", fxstore.Spec{}), rollout.Module),
			wantErr: []string{`controller name "rollout" is used by both reliability.configMapsWith`, "rollout.newController"},
		},
		{
			name:    "empty controller name",
			give:    configMapsWith("bad", "", fxstore.Spec{}),
			wantErr: []string{`controller "": name is empty`},
		},
		{
			name:    "invalid controller name",
			give:    configMapsWith("bad", "not a name", fxstore.Spec{}),
			wantErr: []string{`controller "not a name": invalid name`},
		},
		{
			name: "nil reconciler",
			give: fx.Module("bad", fxcontroller.Provide(func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
				cms, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
				if err != nil {
					return nil, err
				}
				var typedNil *stepReconciler
				return fxcontroller.New("bad", cms, typedNil)
			})),
			wantErr: []string{`controller "bad": reconciler is nil`},
		},
		{
			name: "nil store, its error ignored",
			give: fx.Module("bad", fxcontroller.Provide(func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
				cms, _ := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "=="})
				return fxcontroller.New("bad", cms, noop)
			})),
			wantErr: []string{`controller "bad": primary store is nil; pass the store fxstore.For or fxshard.For returned (check its error)`},
		},
		{
			name:    "not a constructor",
			give:    fxcontroller.Provide("rollout"),
			wantErr: []string{"fxcontroller.Provide(string): got string; want a function returning *fxcontroller.Controller"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				registry *fxstore.Registry
				app      *fx.App
			)
			log, _ := newLogger(t, zap.ErrorLevel+1)
			require.NotPanics(t, func() {
				app = fx.New(
					fx.Supply(testenv.Config(t), log),
					fxstore.Module,
					fxcontroller.Module,
					lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0"}),
					tt.give,
					fx.Populate(&registry),
				)
			})
			err := app.Err()
			if err == nil {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				err = app.Start(ctx)
				if err == nil {
					require.NoError(t, app.Stop(ctx))
				} else {
					require.True(t, tt.atStart, "fx.New took it: %v", err)
				}
			} else {
				require.False(t, tt.atStart, "fx.New failed: %v", err)
			}
			if len(tt.wantErr) == 0 {
				require.NoError(t, err)
				tt.check(t, registry)
				return
			}
			require.Error(t, err)
			t.Log(err)
			for _, want := range tt.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

// kubectl runs kubectl, as the test control plane's admin, with stdin.
func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	args = append([]string{"--kubeconfig", testenv.KubeconfigPath(t), "--cache-dir", t.TempDir()}, args...)
	cmd := exec.CommandContext(t.Context(), testenv.KubectlPath(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args[4:], " "), stderr.String())
	return string(out)
}

// badObjects are objects with malformed or unusable annotations and labels
// for the example modules, applied with kubectl into namespace "bad-input",
// next to good ones that must be handled as usual.
func badObjects(long string) string {
	deployment := func(name, reload string) string {
		return fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
  annotations: {fxkube.io/reload: %q}
spec:
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
      - name: app
        image: nginx
        envFrom: [{configMapRef: {name: settings}}]
---`, name, reload)
	}
	source := func(name, labelValue, targets string) string {
		annotations := ""
		if targets != "" {
			annotations = fmt.Sprintf("\n  annotations: {fxkube.io/mirror-to: %q}", targets)
		}
		return fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
  labels: {fxkube.io/mirror: %q}%s
data: {color: blue}
---`, name, labelValue, annotations)
	}
	return strings.Join([]string{
		`
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {greeting: hello}
---`,
		deployment("good", "true"),
		deployment("not-a-boolean", "yes please"),
		deployment("empty", ""),
		deployment("unicode", "wahr ✓"),
		source("good-source", "true", "bad-input-target"),
		source("garbled-targets", "true", " ,Bad_NS,bad-input,a/b,bad-input-target,bad-input-target,"+strings.Repeat("x", 100)),
		source("no-targets", "true", ""),
		source("missing-namespace", "true", "bad-input-nowhere"),
		source("long-targets", "true", long),
		source("label-not-true", "yes", "bad-input-target"),
		source("taken", "true", "bad-input-target"),
	}, "")
}

// TestBadObjects applies, with kubectl, objects the example modules cannot
// use as they are to a running app: each is reported (an Event on it and a
// warning in the log) and otherwise ignored; no reconcile fails, panics or
// retries in a loop, and the good objects beside them are handled.
func TestBadObjects(t *testing.T) {
	const ns, target = "bad-input", "bad-input-target"
	admin := newClient(t, testenv.Config(t))
	createNamespace(t, admin, ns)
	createNamespace(t, admin, target)
	// An object of the name of a source in its target, that is not a copy.
	require.NoError(t, admin.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "taken"}}))

	log, logs := newLogger(t, zap.ErrorLevel)
	probes := testenv.LoopbackAddr(t)
	a := newExampleApp(t, testenv.Config(t), lifecycle.Config{HealthProbeBindAddress: probes}, log)
	controllers := []string{"rollout", mirror.ConfigMapsController, mirror.SecretsController}
	before := gatherMetrics(t)
	a.RequireStart()
	defer a.RequireStop()

	var long []string
	for i := range 500 {
		long = append(long, fmt.Sprintf("Bad_%d", i))
	}
	kubectl(t, badObjects(strings.Join(long, ",")), "apply", "--namespace", ns, "-f", "-")

	// The good objects are handled.
	require.Eventually(t, func() bool {
		var cm corev1.ConfigMap
		return admin.Get(t.Context(), client.ObjectKey{Namespace: target, Name: "good-source"}, &cm) == nil
	}, 30*time.Second, 100*time.Millisecond, "the good source is mirrored")
	require.Eventually(t, func() bool {
		return kubectl(t, "", "get", "deployment", "good", "--namespace", ns, "--output",
			`jsonpath={.spec.template.metadata.annotations.fxkube\.io/config-hash}`) != ""
	}, 30*time.Second, 100*time.Millisecond, "the good Deployment gets its hash")

	// Each bad one is reported on itself.
	want := map[string][]string{ // object: Event reason, and parts of its note
		"not-a-boolean":     {"InvalidAnnotation", `"yes please" is not a boolean`},
		"empty":             {"InvalidAnnotation", `"" is not a boolean`},
		"unicode":           {"InvalidAnnotation", `"wahr ✓" is not a boolean`},
		"garbled-targets":   {"InvalidTargets", "empty entry", `"Bad_NS" is not a namespace name`, `"bad-input" is the source's own namespace`, "and 2 more"},
		"no-targets":        {"NoTargets", "names no namespace"},
		"missing-namespace": {"NamespaceNotFound", "namespace bad-input-nowhere does not exist"},
		"long-targets":      {"InvalidTargets", `"Bad_0" is not a namespace name`, "and 497 more"},
		"taken":             {"CopyConflict", "already holds a ConfigMap named taken that is not a copy"},
	}
	var events []eventsv1.Event
	require.Eventually(t, func() bool {
		events = eventsIn(t, admin, ns)
		for name, w := range want {
			if findEvent(events, name, w[0]) == nil {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "an Event on each bad object")
	for name, w := range want {
		e := findEvent(events, name, w[0])
		assert.Equal(t, corev1.EventTypeWarning, e.Type, name)
		assert.LessOrEqual(t, len(e.Note), 1024, "%s: the API server takes notes of up to 1 kB", name)
		for _, part := range w[1:] {
			assert.Contains(t, e.Note, part, name)
		}
		t.Logf("%s: %s: %s", name, e.Reason, e.Note)
	}
	for _, name := range []string{"not-a-boolean", "garbled-targets", "no-targets", "missing-namespace", "taken"} {
		assert.NotZero(t, logs.FilterLevelExact(zap.WarnLevel).Filter(func(e observer.LoggedEntry) bool {
			return e.ContextMap()["name"] == name
		}).Len(), "%s: a warning in the log", name)
	}

	// And otherwise ignored.
	var cm corev1.ConfigMap
	require.NoError(t, admin.Get(t.Context(), client.ObjectKey{Namespace: target, Name: "garbled-targets"}, &cm),
		"the valid entry of a garbled annotation is mirrored")
	for _, d := range []string{"not-a-boolean", "empty", "unicode"} {
		assert.Empty(t, kubectl(t, "", "get", "deployment", d, "--namespace", ns, "--output",
			`jsonpath={.spec.template.metadata.annotations.fxkube\.io/config-hash}`), "%s is not rolled out", d)
	}
	assert.Empty(t, kubectl(t, "", "get", "configmap", "label-not-true", "--namespace", target, "--ignore-not-found"),
		"a source label other than \"true\" is no source")
	require.NoError(t, admin.Get(t.Context(), client.ObjectKey{Namespace: target, Name: "taken"}, &cm))
	assert.Empty(t, cm.Labels, "the object in the way is left alone")

	time.Sleep(2 * time.Second) // time for any retry loop to show
	after := gatherMetrics(t)
	for _, c := range controllers {
		label := map[string]string{"controller": c}
		for _, metric := range []string{"controller_runtime_reconcile_errors_total", "controller_runtime_reconcile_panics_total"} {
			assert.Zero(t, after.value(metric, label)-before.value(metric, label), "%s: %s", c, metric)
		}
		t.Logf("%s: %v reconciles", c, after.value("controller_runtime_reconcile_total", label)-before.value("controller_runtime_reconcile_total", label))
	}
	assert.Equal(t, 200, statusOf(t, probes, "/readyz"), "the app is ready throughout")
}

func eventsIn(t *testing.T, c client.Client, ns string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, c.List(t.Context(), &list, client.InNamespace(ns)))
	return list.Items
}

func findEvent(events []eventsv1.Event, regarding, reason string) *eventsv1.Event {
	for i, e := range events {
		if e.Regarding.Name == regarding && e.Reason == reason {
			return &events[i]
		}
	}
	return nil
}

package rollout_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/modules/rollout"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ns = "default"

func deployment(name string, annotations map[string]string, spec corev1.PodSpec) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       spec,
			},
		},
	}
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// containers returns one container with env and envFrom.
func containers(env []corev1.EnvVar, envFrom ...corev1.EnvFromSource) []corev1.Container {
	return []corev1.Container{{Name: "app", Image: "app", Env: env, EnvFrom: envFrom}}
}

func optIn(v string) map[string]string { return map[string]string{rollout.ReloadAnnotation: v} }

var (
	hashPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

	// The objects the table's Deployments refer to, and changed versions.
	settings        = testenv.ConfigMap(ns, "settings", testenv.Data{"greeting": "hello"})
	settingsChanged = testenv.ConfigMap(ns, "settings", testenv.Data{"greeting": "hi"})
	creds           = secret("creds", map[string]string{"password": "s3cret"})
	credsChanged    = secret("creds", map[string]string{"password": "rotated"})
	other           = testenv.ConfigMap(ns, "other", testenv.Data{"x": "1"})
	otherChanged    = testenv.ConfigMap(ns, "other", testenv.Data{"x": "2"})
	missing         = testenv.ConfigMap(ns, "missing", testenv.Data{"now": "here"})

	envFromSettings = containers(nil, corev1.EnvFromSource{
		ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}},
	})
)

// stores are the app's stores for the objects a test changes, to wait until
// they have seen a change before reconciling. Asking for them with the
// module's specs shares its stores.
type stores struct {
	deployments *fxstore.Store[*appsv1.Deployment]
	configMaps  *fxstore.Store[*corev1.ConfigMap]
	secrets     *fxstore.Store[*corev1.Secret]
}

func (s *stores) invoke() fx.Option {
	return fx.Invoke(func(r *fxstore.Registry) (err error) {
		if s.deployments, err = fxstore.For[*appsv1.Deployment](r, fxstore.Spec{}); err != nil {
			return err
		}
		if s.configMaps, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}); err != nil {
			return err
		}
		s.secrets, err = fxstore.For[*corev1.Secret](r, fxstore.Spec{})
		return err
	})
}

// waitFor waits until store holds obj at its resource version.
func waitFor[T client.Object](t *testing.T, store *fxstore.Store[T], obj client.Object) {
	t.Helper()
	require.Eventually(t, func() bool {
		got, err := store.Get(obj.GetNamespace(), obj.GetName())
		return err == nil && got.GetResourceVersion() == obj.GetResourceVersion()
	}, 5*time.Second, 5*time.Millisecond, "store sees %s at version %s", obj.GetName(), obj.GetResourceVersion())
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		name string
		give *appsv1.Deployment
		// change is written (created or updated) after the first reconcile;
		// a second reconcile follows.
		change client.Object

		wantHash    bool // the first reconcile sets a hash
		wantChanged bool // the second reconcile changes it
		wantEvents  []string
	}{
		{
			name:       "opted in gets a hash",
			give:       deployment("web", optIn("true"), corev1.PodSpec{Containers: envFromSettings}),
			wantHash:   true,
			wantEvents: []string{"Normal ConfigHashSet"},
		},
		{
			name:        "referenced data change changes the hash",
			give:        deployment("web", optIn("true"), corev1.PodSpec{Containers: envFromSettings}),
			change:      settingsChanged,
			wantHash:    true,
			wantChanged: true,
			wantEvents:  []string{"Normal ConfigHashSet", "Normal ConfigChanged"},
		},
		{
			name:       "unreferenced change keeps the hash",
			give:       deployment("web", optIn("true"), corev1.PodSpec{Containers: envFromSettings}),
			change:     otherChanged,
			wantHash:   true,
			wantEvents: []string{"Normal ConfigHashSet"},
		},
		{
			name:   "not opted in is untouched",
			give:   deployment("web", nil, corev1.PodSpec{Containers: envFromSettings}),
			change: settingsChanged,
		},
		{
			name:   "opted out is untouched",
			give:   deployment("web", optIn("false"), corev1.PodSpec{Containers: envFromSettings}),
			change: settingsChanged,
		},
		{
			name:       "malformed annotation is reported and ignored",
			give:       deployment("web", optIn("yes please"), corev1.PodSpec{Containers: envFromSettings}),
			change:     settingsChanged,
			wantEvents: []string{"Warning InvalidAnnotation", "Warning InvalidAnnotation"},
		},
		{
			name: "env configMapKeyRef in an init container",
			give: deployment("web", optIn("1"), corev1.PodSpec{
				InitContainers: containers([]corev1.EnvVar{{Name: "G", ValueFrom: &corev1.EnvVarSource{
					ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "greeting"},
				}}}),
				Containers: containers(nil),
			}),
			change: settingsChanged, wantHash: true, wantChanged: true,
			wantEvents: []string{"Normal ConfigHashSet", "Normal ConfigChanged"},
		},
		{
			name: "env secretKeyRef",
			give: deployment("web", optIn("True"), corev1.PodSpec{
				Containers: containers([]corev1.EnvVar{{Name: "P", ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"},
				}}}),
			}),
			change: credsChanged, wantHash: true, wantChanged: true,
			wantEvents: []string{"Normal ConfigHashSet", "Normal ConfigChanged"},
		},
		{
			name: "envFrom secret in an init container",
			give: deployment("web", optIn("true"), corev1.PodSpec{
				InitContainers: containers(nil, corev1.EnvFromSource{
					SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}},
				}),
				Containers: containers(nil),
			}),
			change: credsChanged, wantHash: true, wantChanged: true,
			wantEvents: []string{"Normal ConfigHashSet", "Normal ConfigChanged"},
		},
		{
			name: "configMap volume",
			give: deployment("web", optIn("true"), corev1.PodSpec{
				Containers: containers(nil),
				Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}},
				}}},
			}),
			change: settingsChanged, wantHash: true, wantChanged: true,
			wantEvents: []string{"Normal ConfigHashSet", "Normal ConfigChanged"},
		},
		{
			name: "secret volume",
			give: deployment("web", optIn("true"), corev1.PodSpec{
				Containers: containers(nil),
				Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
					Secret: &corev1.SecretVolumeSource{SecretName: "creds"},
				}}},
			}),
			change: credsChanged, wantHash: true, wantChanged: true,
			wantEvents: []string{"Normal ConfigHashSet", "Normal ConfigChanged"},
		},
		{
			name: "projected configMap",
			give: deployment("web", optIn("true"), corev1.PodSpec{
				Containers: containers(nil),
				Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
				}}}},
			}),
			change: settingsChanged, wantHash: true, wantChanged: true,
			wantEvents: []string{"Normal ConfigHashSet", "Normal ConfigChanged"},
		},
		{
			name: "projected secret",
			give: deployment("web", optIn("true"), corev1.PodSpec{
				Containers: containers(nil),
				Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}},
				}}}},
			}),
			change: credsChanged, wantHash: true, wantChanged: true,
			wantEvents: []string{"Normal ConfigHashSet", "Normal ConfigChanged"},
		},
		{
			name: "missing reference, created later",
			give: deployment("web", optIn("true"), corev1.PodSpec{Containers: containers(nil, corev1.EnvFromSource{
				ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}},
			})}),
			change: missing, wantHash: true, wantChanged: true,
			wantEvents: []string{"Normal ConfigHashSet", "Normal ConfigChanged"},
		},
		{
			name: "missing optional reference, created later",
			give: deployment("web", optIn("true"), corev1.PodSpec{
				Containers: envFromSettings,
				Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}, Optional: new(true)},
				}}},
			}),
			change: missing, wantHash: true, wantChanged: true,
			wantEvents: []string{"Normal ConfigHashSet", "Normal ConfigChanged"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s stores
			app := fxcontrollertest.New(t, fx.Options(rollout.Module, s.invoke()),
				tt.give, settings.DeepCopy(), creds.DeepCopy(), other.DeepCopy())
			key := client.ObjectKeyFromObject(tt.give)
			get := func() *appsv1.Deployment {
				var d appsv1.Deployment
				require.NoError(t, app.Client().Get(t.Context(), key, &d))
				return &d
			}
			before := get()

			_, err := app.Reconcile(t.Context(), "rollout", key)
			require.NoError(t, err)
			first := get()
			hash := first.Spec.Template.Annotations[rollout.ConfigHashAnnotation]
			if tt.wantHash {
				assert.Regexp(t, hashPattern, hash)
			} else {
				assert.Empty(t, hash)
				assert.Equal(t, before.ResourceVersion, first.ResourceVersion, "untouched")
			}

			if tt.change != nil {
				waitFor(t, s.deployments, first)
				change := tt.change.DeepCopyObject().(client.Object)
				if err := app.Client().Update(t.Context(), change); err != nil {
					require.NoError(t, app.Client().Create(t.Context(), change))
				}
				switch change.(type) {
				case *corev1.ConfigMap:
					waitFor(t, s.configMaps, change)
				case *corev1.Secret:
					waitFor(t, s.secrets, change)
				}
				_, err := app.Reconcile(t.Context(), "rollout", key)
				require.NoError(t, err)
			}
			second := get()
			newHash := second.Spec.Template.Annotations[rollout.ConfigHashAnnotation]
			if tt.wantChanged {
				assert.Regexp(t, hashPattern, newHash)
				assert.NotEqual(t, hash, newHash)
			} else {
				assert.Equal(t, hash, newHash)
				assert.Equal(t, first.ResourceVersion, second.ResourceVersion, "untouched")
			}
			assert.Equal(t, before.Annotations, second.Annotations, "the Deployment's own annotations are kept")

			var events []string
			for _, e := range app.Events() {
				assert.Equal(t, "Deployment", e.Regarding.Kind)
				assert.Equal(t, "web", e.Regarding.Name)
				events = append(events, e.Type+" "+e.Reason)
			}
			assert.Equal(t, tt.wantEvents, events)
		})
	}
}

func TestInvalidAnnotationEvent(t *testing.T) {
	d := deployment("web", optIn("yes please"), corev1.PodSpec{Containers: envFromSettings})
	app := fxcontrollertest.New(t, rollout.Module, d, settings.DeepCopy())
	_, err := app.Reconcile(t.Context(), "rollout", client.ObjectKeyFromObject(d))
	require.NoError(t, err)
	events := app.Events()
	require.Len(t, events, 1)
	assert.Equal(t, `Warning InvalidAnnotation Deployment default/web: annotation fxkube.io/reload: "yes please" is not a boolean; `+
		`set it to "true" to opt in; the Deployment is not rolled out on configuration changes`, events[0].String())
	assert.Equal(t, "rollout", events[0].Controller)
}

// Equal data hashes equal, whichever Deployment refers to it and however.
func TestHashIsStable(t *testing.T) {
	byEnv := deployment("a", optIn("true"), corev1.PodSpec{Containers: envFromSettings})
	byVolume := deployment("b", optIn("true"), corev1.PodSpec{
		Containers: containers(nil),
		Volumes: []corev1.Volume{
			{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
			{Name: "w", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
		},
	})
	app := fxcontrollertest.New(t, rollout.Module, byEnv, byVolume, settings.DeepCopy())
	var hashes []string
	for _, d := range []*appsv1.Deployment{byEnv, byVolume} {
		_, err := app.Reconcile(t.Context(), "rollout", client.ObjectKeyFromObject(d))
		require.NoError(t, err)
		var got appsv1.Deployment
		require.NoError(t, app.Client().Get(t.Context(), client.ObjectKeyFromObject(d), &got))
		hashes = append(hashes, got.Spec.Template.Annotations[rollout.ConfigHashAnnotation])
	}
	assert.Regexp(t, hashPattern, hashes[0])
	assert.Equal(t, hashes[0], hashes[1])
}

// The running controller rolls Deployments when what they refer to changes,
// which exercises its watches of ConfigMaps and Secrets, and leaves the rest
// alone.
func TestControllerRuns(t *testing.T) {
	web := deployment("web", optIn("true"), corev1.PodSpec{Containers: envFromSettings})
	plain := deployment("plain", nil, corev1.PodSpec{Containers: envFromSettings})
	bad := deployment("bad", optIn("yes please"), corev1.PodSpec{Containers: envFromSettings})
	core, logs := observer.New(zapcore.InfoLevel)
	var (
		src      *fxstoretest.Source
		recorder *fxcontrollertest.Recorder
		registry *fxstore.Registry
	)
	app := fxtest.New(t,
		fx.Supply(zap.New(core)),
		fxstoretest.Module(web, plain, bad, settings.DeepCopy(), creds.DeepCopy()),
		fxcontrollertest.Module,
		rollout.Module,
		fx.Populate(&src, &recorder, &registry),
	)
	app.RequireStart()
	defer app.RequireStop()
	c := src.Client()

	hashOf := func(d *appsv1.Deployment) string {
		var got appsv1.Deployment
		require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(d), &got))
		return got.Spec.Template.Annotations[rollout.ConfigHashAnnotation]
	}
	eventually := func(cond func() bool, msg string) {
		t.Helper()
		require.Eventually(t, cond, 5*time.Second, 10*time.Millisecond, msg)
	}
	eventually(func() bool { return hashOf(web) != "" }, "the opted-in Deployment gets a hash")
	first := hashOf(web)
	var p appsv1.Deployment
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(plain), &p))
	plainVersion := p.ResourceVersion

	require.NoError(t, c.Update(t.Context(), settingsChanged.DeepCopy()))
	eventually(func() bool { return hashOf(web) != first }, "a referenced ConfigMap's change changes the hash")

	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(plain), &p))
	assert.Equal(t, plainVersion, p.ResourceVersion, "not opted in: untouched")
	assert.Empty(t, p.Spec.Template.Annotations)

	// Opting in later is a metadata change, which the controller sees.
	p.Annotations = optIn("true")
	require.NoError(t, c.Update(t.Context(), &p))
	eventually(func() bool { return hashOf(plain) == hashOf(web) }, "a Deployment that opts in gets the hash")

	assert.Empty(t, hashOf(bad))
	assert.Eventually(t, func() bool {
		return logs.FilterMessage("ignoring Deployment with an invalid annotation").FilterField(zap.String("name", "bad")).Len() > 0
	}, 5*time.Second, 10*time.Millisecond, "the invalid annotation is logged")
	// Events follow the writes they report.
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		var reasons []string
		for _, e := range recorder.Events() {
			reasons = append(reasons, e.Regarding.Name+" "+e.Reason)
		}
		assert.ElementsMatch(c, []string{"web ConfigHashSet", "bad InvalidAnnotation", "web ConfigChanged", "plain ConfigHashSet"}, reasons)
	}, 5*time.Second, 10*time.Millisecond)

	// The module's three stores, one per kind.
	assert.Len(t, registry.Stores(), 3)
}

package rollout

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReferencesOf(t *testing.T) {
	cmRef := func(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{{
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: cmRef("s-init")}}},
		}},
		Containers: []corev1.Container{{
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: cmRef("c-from")}}},
			Env: []corev1.EnvVar{
				{Name: "PLAIN", Value: "x"},
				{Name: "FIELD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef("c-key")}}},
				{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: cmRef("s-key")}}},
			},
		}},
		Volumes: []corev1.Volume{
			{VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: cmRef("c-from")}}},
			{VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s-vol"}}},
			{VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: cmRef("c-proj")}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: cmRef("s-proj")}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			}}}},
		},
	}
	got := referencesOf(spec)
	assert.Equal(t, []string{"c-from", "c-key", "c-proj"}, got.configMaps, "sorted, without duplicates")
	assert.Equal(t, []string{"s-init", "s-key", "s-proj", "s-vol"}, got.secrets)
}

var hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// FuzzConfigHash checks the opt-in annotation's parsing, the references and
// the hash on arbitrary names and data. Its seed corpus is in
// testdata/fuzz/FuzzConfigHash.
func FuzzConfigHash(f *testing.F) {
	f.Fuzz(func(t *testing.T, reload, name, key, value string) {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", Annotations: map[string]string{ReloadAnnotation: reload}},
		}
		d.Spec.Template.Spec = corev1.PodSpec{
			Containers: []corev1.Container{{Env: []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key},
			}}}}},
			Volumes: []corev1.Volume{{VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: name}}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: name}}},
				},
			}}}},
		}

		got, err := optedIn(d)
		want, parseErr := strconv.ParseBool(reload)
		require.Equal(t, parseErr == nil, err == nil, "optedIn(%q) fails exactly when ParseBool does", reload)
		require.Equal(t, want, got)

		refs := referencesOf(&d.Spec.Template.Spec)
		if name == "" {
			require.Empty(t, refs.configMaps)
			require.Empty(t, refs.secrets)
			return
		}
		require.Equal(t, []string{name}, refs.configMaps)
		require.Equal(t, []string{name}, refs.secrets)
		if got {
			require.Equal(t, []string{"ns/" + name}, indexConfigMaps(d))
			require.Equal(t, []string{"ns/" + name}, indexSecrets(d))
		} else {
			require.Empty(t, indexConfigMaps(d))
		}

		hashOf := func(cmData map[string]string, secretData map[string]string) string {
			t.Helper()
			h, err := configHash(refs,
				func(n string) (*corev1.ConfigMap, error) {
					if cmData == nil {
						return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), n)
					}
					return &corev1.ConfigMap{Data: cmData}, nil
				},
				func(n string) (*corev1.Secret, error) {
					s := &corev1.Secret{Data: map[string][]byte{}}
					for k, v := range secretData {
						s.Data[k] = []byte(v)
					}
					return s, nil
				})
			require.NoError(t, err)
			require.Regexp(t, hexHash, h)
			return h
		}
		data := map[string]string{key: value}
		h := hashOf(data, nil)
		require.Equal(t, h, hashOf(map[string]string{key: value}, nil), "stable")
		require.NotEqual(t, h, hashOf(map[string]string{key: value + "x"}, nil), "a changed value changes it")
		require.NotEqual(t, h, hashOf(nil, nil), "a missing ConfigMap hashes differently")
		require.NotEqual(t, h, hashOf(map[string]string{}, data), "the same data in the Secret hashes differently")
		if value != "" {
			// Length prefixes keep key/value boundaries apart.
			require.NotEqual(t, h, hashOf(map[string]string{key + value[:1]: value[1:]}, nil))
		}
	})
}

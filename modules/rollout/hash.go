package rollout

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/fxkube/fxkube/internal/datahash"
)

// references are the names of the ConfigMaps and Secrets a pod spec refers
// to, each sorted and without duplicates.
type references struct {
	configMaps []string
	secrets    []string
}

// referencesOf returns what spec refers to through env, envFrom and volumes,
// in containers and init containers.
func referencesOf(spec *corev1.PodSpec) references {
	var refs references
	addConfigMap := func(name string) {
		if name != "" {
			refs.configMaps = append(refs.configMaps, name)
		}
	}
	addSecret := func(name string) {
		if name != "" {
			refs.secrets = append(refs.secrets, name)
		}
	}
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range containers {
			c := &containers[i]
			for _, from := range c.EnvFrom {
				if from.ConfigMapRef != nil {
					addConfigMap(from.ConfigMapRef.Name)
				}
				if from.SecretRef != nil {
					addSecret(from.SecretRef.Name)
				}
			}
			for _, env := range c.Env {
				if env.ValueFrom == nil {
					continue
				}
				if ref := env.ValueFrom.ConfigMapKeyRef; ref != nil {
					addConfigMap(ref.Name)
				}
				if ref := env.ValueFrom.SecretKeyRef; ref != nil {
					addSecret(ref.Name)
				}
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			addConfigMap(v.ConfigMap.Name)
		}
		if v.Secret != nil {
			addSecret(v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					addConfigMap(src.ConfigMap.Name)
				}
				if src.Secret != nil {
					addSecret(src.Secret.Name)
				}
			}
		}
	}
	slices.Sort(refs.configMaps)
	slices.Sort(refs.secrets)
	refs.configMaps = slices.Compact(refs.configMaps)
	refs.secrets = slices.Compact(refs.secrets)
	return refs
}

// Index names of the Deployment store: opted-in Deployments by the
// "namespace/name" of each ConfigMap or Secret they refer to.
const (
	configMapIndex = "rollout.fxkube.io/configmaps"
	secretIndex    = "rollout.fxkube.io/secrets"
)

func indexConfigMaps(d *appsv1.Deployment) []string {
	return indexKeys(d, referencesOf(&d.Spec.Template.Spec).configMaps)
}

func indexSecrets(d *appsv1.Deployment) []string {
	return indexKeys(d, referencesOf(&d.Spec.Template.Spec).secrets)
}

// indexKeys returns the index values of the objects names in d's namespace,
// or none when d has not opted in: only opted-in Deployments need to hear of
// changes to what they use.
func indexKeys(d *appsv1.Deployment, names []string) []string {
	if reload, err := optedIn(d); err != nil || !reload {
		return nil
	}
	keys := make([]string, len(names))
	for i, name := range names {
		keys[i] = d.Namespace + "/" + name
	}
	return keys
}

// configHash returns the hex SHA-256 of the data of the objects refs names,
// which configMap and secret look up by name. An object they report not found
// (a Kubernetes NotFound error) is hashed as missing; any other error is
// returned.
//
// The input is unambiguous (every string is length-prefixed, maps are in key
// order), so different data never hashes the same by construction.
func configHash(refs references, configMap func(name string) (*corev1.ConfigMap, error), secret func(name string) (*corev1.Secret, error)) (string, error) {
	w := datahash.New()
	for _, name := range refs.configMaps {
		w.String("ConfigMap")
		w.String(name)
		cm, err := configMap(name)
		switch {
		case apierrors.IsNotFound(err):
			w.String("missing")
		case err != nil:
			return "", err
		default:
			datahash.ConfigMap(w, cm)
		}
	}
	for _, name := range refs.secrets {
		w.String("Secret")
		w.String(name)
		s, err := secret(name)
		switch {
		case apierrors.IsNotFound(err):
			w.String("missing")
		case err != nil:
			return "", err
		default:
			w.String("data")
			datahash.Map(w, s.Data)
		}
	}
	return w.Sum(), nil
}

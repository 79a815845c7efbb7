package testenv

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigMap returns the ConfigMap namespace/name with what opts give it:
//
//	testenv.ConfigMap("default", "web", testenv.Labels{"app": "web"}, testenv.Data{"port": "80"})
//
// It holds the maps given, not copies. A field no option sets stays nil.
func ConfigMap(namespace, name string, opts ...ConfigMapOption) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	for _, o := range opts {
		o.applyToConfigMap(cm)
	}
	return cm
}

// ConfigMapOption is an option of [ConfigMap]: [Labels], [Annotations] or
// [Data]. Of two options of one kind, the later wins.
type ConfigMapOption interface {
	applyToConfigMap(*corev1.ConfigMap)
}

// Labels are an object's labels.
type Labels map[string]string

func (l Labels) applyToConfigMap(cm *corev1.ConfigMap) { cm.Labels = l }

// Annotations are an object's annotations.
type Annotations map[string]string

func (a Annotations) applyToConfigMap(cm *corev1.ConfigMap) { cm.Annotations = a }

// Data is a ConfigMap's data.
type Data map[string]string

func (d Data) applyToConfigMap(cm *corev1.ConfigMap) { cm.Data = d }

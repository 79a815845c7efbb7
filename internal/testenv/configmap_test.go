package testenv

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConfigMap(t *testing.T) {
	tests := []struct {
		name string
		give []ConfigMapOption
		want *corev1.ConfigMap
	}{
		{
			name: "no options",
			want: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}},
		},
		{
			name: "every option",
			give: []ConfigMapOption{Labels{"app": "web"}, Annotations{"v": "1"}, Data{"k": "v"}},
			want: &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"v": "1"}},
				Data:       map[string]string{"k": "v"},
			},
		},
		{
			name: "the later of one kind wins",
			give: []ConfigMapOption{Data{"k": "1"}, Data{"k": "2"}},
			want: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"k": "2"}},
		},
		{
			name: "nil maps stay nil",
			give: []ConfigMapOption{Labels(nil), Data(nil)},
			want: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ConfigMap("ns", "cm", tt.give...))
		})
	}
}

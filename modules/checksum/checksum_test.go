package checksum_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/fxkube/fxkube/modules/checksum"
)

func TestSum(t *testing.T) {
	a := &corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "2"}}
	b := &corev1.ConfigMap{Data: map[string]string{"b": "2", "a": "1"}}
	assert.Equal(t, checksum.Sum(a), checksum.Sum(b), "the order of keys does not matter")
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, checksum.Sum(a))
	for _, other := range []*corev1.ConfigMap{
		{Data: map[string]string{"a": "12"}},
		{Data: map[string]string{"a=1": ""}},
		{Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": []byte("2")}},
		{},
	} {
		assert.NotEqual(t, checksum.Sum(a), checksum.Sum(other), "%v", other)
	}
}

package datahash_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fxkube/fxkube/internal/datahash"
)

func TestDifferentDataHashesDifferently(t *testing.T) {
	sum := func(write func(w *datahash.Writer)) string {
		w := datahash.New()
		write(w)
		return w.Sum()
	}
	a := sum(func(w *datahash.Writer) { datahash.Map(w, map[string]string{"a": "1", "b": "2"}) })
	assert.Equal(t, a, sum(func(w *datahash.Writer) { datahash.Map(w, map[string]string{"b": "2", "a": "1"}) }), "the order of keys does not matter")
	assert.Equal(t, a, sum(func(w *datahash.Writer) { datahash.Map(w, map[string][]byte{"a": []byte("1"), "b": []byte("2")}) }), "bytes hash as the same string")
	assert.Regexp(t, `^[0-9a-f]{64}$`, a)
	for desc, write := range map[string]func(w *datahash.Writer){
		"a value split":         func(w *datahash.Writer) { datahash.Map(w, map[string]string{"a": "12"}) },
		"a key holding a value": func(w *datahash.Writer) { datahash.Map(w, map[string]string{"a=1": "", "b": "2"}) },
		"strings, not a map":    func(w *datahash.Writer) { w.String("a"); w.String("1"); w.String("b"); w.String("2") },
		"nothing":               func(*datahash.Writer) {},
	} {
		assert.NotEqual(t, a, sum(write), desc)
	}
	assert.NotEqual(t, sum(func(w *datahash.Writer) { w.String("ab"); w.String("") }), sum(func(w *datahash.Writer) { w.String("a"); w.String("b") }),
		"length prefixes keep boundaries")
}

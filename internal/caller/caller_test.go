package caller_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fxkube/fxkube/internal/caller"
)

func whoCalls() string { return caller.Name(1) }

func generic[T any]() string { return caller.Name(0) }

func TestName(t *testing.T) {
	assert.Equal(t, "caller_test.TestName", whoCalls())
	assert.Equal(t, "caller_test.generic", generic[int](), "type parameters are dropped")
	assert.Equal(t, "unknown", caller.Name(1000))
}

func wrapper() string { return inner() }

func inner() string {
	return caller.Outside("github.com/fxkube/fxkube/internal/caller_test")
}

func TestOutside(t *testing.T) {
	assert.Equal(t, "testing.tRunner", wrapper(), "every frame of the package is skipped")
	assert.Equal(t, "caller_test.TestOutside", caller.Outside("github.com/fxkube/fxkube/internal/caller"),
		"a package is matched by its whole path: caller_test is not caller")
}

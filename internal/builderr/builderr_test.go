package builderr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/fxkube/fxkube/internal/builderr"
)

var errBad = errors.New("bad")

type thing struct{}

func TestReadable(t *testing.T) {
	tests := []struct {
		name string
		give []fx.Option
		want string
	}{
		{
			name: "a constructor's error",
			give: []fx.Option{fx.Provide(func() (*thing, error) { return nil, fmt.Errorf("hosted operator %q: %w", "lws", errBad) }), fx.Invoke(func(*thing) {})},
			want: `hosted operator "lws": bad`,
		},
		{
			name: "an invoke's error",
			give: []fx.Option{fx.Invoke(func() error { return fmt.Errorf("store x: %w", errBad) })},
			want: "store x: bad",
		},
		{
			name: "fx.Error",
			give: []fx.Option{fx.Error(fmt.Errorf("fxcontroller.SetupWithManager(f): %w", errBad))},
			want: "fxcontroller.SetupWithManager(f): bad",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			full := fx.New(append(tt.give, fx.NopLogger)...).Err()
			require.Error(t, full)
			err := builderr.Readable(full)
			assert.Equal(t, tt.want, err.Error())
			assert.ErrorIs(t, err, errBad)
			assert.ErrorIs(t, err, full, "the whole chain stays reachable")
		})
	}

	t.Run("dig's own", func(t *testing.T) {
		full := fx.New(fx.NopLogger, fx.Invoke(func(*thing) {})).Err()
		require.Error(t, full)
		assert.Equal(t, full, builderr.Readable(full), "a missing type is said by dig")
		assert.Contains(t, full.Error(), "missing type")
	})
	assert.NoError(t, builderr.Readable(nil))
}

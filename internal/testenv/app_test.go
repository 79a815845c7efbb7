package testenv

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/fx"
	"go.uber.org/zap/zaptest"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/lifecycle"
)

func TestApp(t *testing.T) {
	tests := []struct {
		name string
		give lifecycle.Config
		want lifecycle.Config
	}{
		{
			name: "servers off",
			want: lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0"},
		},
		{
			name: "addresses kept",
			give: lifecycle.Config{MetricsBindAddress: "127.0.0.1:1", HealthProbeBindAddress: "127.0.0.1:2", SyncTimeout: 5 * time.Second},
			want: lifecycle.Config{MetricsBindAddress: "127.0.0.1:1", HealthProbeBindAddress: "127.0.0.1:2", SyncTimeout: 5 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				got      lifecycle.Config
				registry *fxstore.Registry
			)
			app := App(t, Config(t), tt.give, zaptest.NewLogger(t), fx.Populate(&got, &registry))
			assert.NoError(t, app.Err())
			assert.Equal(t, tt.want, got)
			assert.NotNil(t, registry, "fxstore.Module is in the app")
		})
	}
}

// An app of no stores starts on the control plane and stops.
func TestAppStarts(t *testing.T) {
	app := App(t, Config(t), lifecycle.Config{}, zaptest.NewLogger(t))
	app.RequireStart()
	app.RequireStop()
}

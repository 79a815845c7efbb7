package webhooks_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	v1 "github.com/fxkube/fxkube/test/webhooks/api/v1"
	v2 "github.com/fxkube/fxkube/test/webhooks/api/v2"
)

// A store of a kind whose conversion webhook does not answer cannot sync:
// its streamed initial list gets only "Too large resource version", which
// does not say why. The start's diagnosis lists one object plainly, and
// names the webhook and why it failed.
func TestConversionWebhookDownAtStart(t *testing.T) {
	hooks, _ := setUp(t, "conversion-down") // the webhook's server is never started
	const syncTimeout = 5 * time.Second
	app := fxtest.New(t,
		fx.Supply(testenv.Config(t), zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))),
		fxstore.Module,
		fxstore.AddToScheme(v1.AddToScheme, v2.AddToScheme),
		fx.Invoke(func(r *fxstore.Registry) error {
			_, err := fxstore.For[*v2.Widget](r, fxstore.Spec{})
			return err
		}),
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0", SyncTimeout: syncTimeout}),
	)
	err := app.Start(t.Context())
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), "store Widget.webhooks.example.fxkube.io/v2 (all namespaces): not synced; last list/watch error: Timeout: Too large resource version")
	assert.Contains(t, err.Error(), "a plain list of one object says why")
	assert.Contains(t, err.Error(), "conversion webhook for webhooks.example.fxkube.io/v1, Kind=Widget failed")
	assert.Contains(t, err.Error(), fmt.Sprintf("https://%s:%d/convert", hooks.LocalServingHost, hooks.LocalServingPort), "the webhook's address")
	assert.Contains(t, err.Error(), "connection refused")
}

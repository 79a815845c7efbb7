package lifecycle_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/fx"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/fxkube/fxkube/internal/contract"
	"github.com/fxkube/fxkube/lifecycle"
)

// Non-gating checks come and go while the app runs. /readyz?verbose lists
// each, as excluded while it fails; /readyz/<name> fails with its cause;
// /readyz itself never fails for one.
func TestNonGatingChecks(t *testing.T) {
	var mu sync.Mutex
	parts := map[string]healthz.Checker{
		"part-east": healthz.Ping,
		"part-away": func(*http.Request) error { return errors.New("away: connection refused") },
		"stores":    func(*http.Request) error { return errors.New("not the app's stores") },
	}
	list := contract.NonGatingChecks(func() map[string]healthz.Checker {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]healthz.Checker, len(parts))
		for name, c := range parts {
			out[name] = c
		}
		return out
	})
	ta := newTestApp(t, lifecycle.Config{},
		fx.Supply(fx.Annotated{Group: contract.NonGatingChecksGroup, Target: list}),
		fx.Supply(fx.Annotated{Group: contract.NonGatingChecksGroup, Target: contract.NonGatingChecks(nil)}))
	ta.app.RequireStart()
	defer ta.app.RequireStop()

	tests := []struct {
		give       string
		wantStatus int
		wantBody   string
	}{
		{"/readyz", http.StatusOK, "ok"},
		{"/readyz?verbose", http.StatusOK, "[+]part-away excluded: ok\n[+]part-east ok\n[+]runnables ok\n[+]stores ok\n[+]webhooks ok\nhealthz check passed\n"},
		{"/readyz?verbose&exclude=part-east", http.StatusOK, "[+]part-away excluded: ok\n[+]part-east excluded: ok\n"},
		{"/readyz/part-east", http.StatusOK, "ok"},
		{"/readyz/part-away", http.StatusInternalServerError, "internal server error: away: connection refused\n"},
		{"/readyz/stores", http.StatusOK, "ok"},
		{"/readyz/part-west", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			status, body := get(t, http.DefaultClient, "http://"+ta.probes+tt.give)
			assert.Equal(t, tt.wantStatus, status, body)
			assert.Contains(t, body, tt.wantBody)
		})
	}

	mu.Lock()
	parts["part-west"] = healthz.Ping
	delete(parts, "part-away")
	mu.Unlock()
	status, body := get(t, http.DefaultClient, "http://"+ta.probes+"/readyz?verbose")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "[+]part-east ok\n[+]part-west ok\n[+]runnables ok\n[+]stores ok\n[+]webhooks ok\nhealthz check passed\n", body)
}

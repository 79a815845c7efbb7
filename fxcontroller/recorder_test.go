package fxcontroller_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
)

// heldEvents is an API server whose event writes hang until the client
// gives up on them, so that a test can stop the app with events in
// flight. Each write that arrives is announced on arrived.
func heldEvents(t *testing.T) (*httptest.Server, <-chan string) {
	t.Helper()
	arrived := make(chan string, 10)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events") {
			http.NotFound(w, r)
			return
		}
		// Read whole, so that the server sees the client go away.
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- r.Method + " " + r.URL.Path
		<-r.Context().Done()
	}))
	t.Cleanup(s.Close)
	return s, arrived
}

// Stopping the app with events of both APIs in flight abandons them, as
// controller-runtime's manager does, without an error in the logs: each
// is said dropped at debug level. (client-go's broadcaster logged the
// events.k8s.io write's "context canceled" as an error, and the core/v1
// write outlived the app.)
func TestRecorderStopsWithEventsInFlight(t *testing.T) {
	server, arrived := heldEvents(t)
	core, logs := observer.New(zapcore.DebugLevel)
	var recorders fxcontroller.RecorderProvider
	app := fxtest.New(t,
		fx.Supply(&rest.Config{Host: server.URL}, zap.New(core)),
		fxstore.Module,
		fxcontroller.Module,
		fx.Populate(&recorders),
	)
	app.RequireStart()
	cm := testenv.ConfigMap("a", "x")
	recorders.GetEventRecorder("rollout").Eventf(cm, nil, corev1.EventTypeNormal, "Synced", "Sync", "in flight")
	recorders.(recorder.Provider).GetEventRecorderFor("rollout").Event(cm, corev1.EventTypeNormal, "Legacy", "in flight") //nolint:staticcheck // the core/v1 API, which operators still use
	var got []string
	for len(got) < 2 {
		select {
		case req := <-arrived:
			got = append(got, req)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %q reached the API server", got)
		}
	}
	assert.ElementsMatch(t, []string{"POST /apis/events.k8s.io/v1/namespaces/a/events", "POST /api/v1/namespaces/a/events"}, got)

	app.RequireStop()
	require.Eventually(t, func() bool { return logs.FilterMessage("event not sent: the app stopped").Len() == 2 }, 10*time.Second, 10*time.Millisecond,
		"both events are said dropped; logs: %v", logs.All())
	for _, e := range logs.All() {
		assert.Less(t, e.Level, zapcore.ErrorLevel, "no error is logged at stop: %s %v", e.Message, e.ContextMap())
	}
	assert.Zero(t, logs.FilterFieldKey("error").FilterLevelExact(zapcore.ErrorLevel).Len())
	reasons := map[string]bool{}
	for _, e := range logs.FilterMessage("event not sent: the app stopped").All() {
		reasons[e.ContextMap()["reason"].(string)] = true
		assert.Contains(t, e.ContextMap()["error"], "context canceled", "what the write ended with")
	}
	assert.Equal(t, map[string]bool{"Synced": true, "Legacy": true}, reasons)
}

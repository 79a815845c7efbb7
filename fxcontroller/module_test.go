package fxcontroller_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
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
	eventsv1 "k8s.io/api/events/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
)

var noop = reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })

func newRollout(stores *fxstore.Registry) (*fxcontroller.Controller, error) {
	cms, err := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{})
	if err != nil {
		return nil, err
	}
	return fxcontroller.New("rollout", cms, noop)
}

func newOtherRollout(stores *fxstore.Registry) (*fxcontroller.Controller, error) {
	secrets, err := fxstore.For[*corev1.Secret](stores, fxstore.Spec{})
	if err != nil {
		return nil, err
	}
	return fxcontroller.New("rollout", secrets, noop)
}

func newMirror(stores *fxstore.Registry) *fxcontroller.Controller {
	cms, err := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{})
	if err != nil {
		panic(err)
	}
	c, err := fxcontroller.New("mirror", cms, noop, fxcontroller.WithLeaderElection(false))
	if err != nil {
		panic(err)
	}
	return c
}

// runnables are what lifecycle receives.
type runnables struct {
	fx.In

	All []manager.Runnable `group:"fxkube.runnables"`
}

func TestProvide(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	var (
		got         runnables
		controllers fxcontroller.Controllers
	)
	app := fxtest.New(t,
		fx.Supply(zap.New(core)),
		fxstore.Module,
		fxcontroller.Collect,
		fx.Module("rollout", fxcontroller.Provide(newRollout)),
		fx.Module("mirror", fxcontroller.Provide(newMirror)),
		fx.Populate(&got, &controllers),
	)
	defer app.RequireStart().RequireStop()

	require.Len(t, controllers, 2)
	assert.Equal(t, "mirror", controllers[0].Name(), "sorted by name")
	assert.Equal(t, "rollout", controllers[1].Name())
	assert.ElementsMatch(t, []manager.Runnable{controllers[0], controllers[1]}, got.All, "lifecycle runs every controller")
	assert.False(t, controllers[0].NeedLeaderElection())

	controllers[1].Logger().Info("hello")
	entries := logs.FilterMessage("hello").All()
	require.Len(t, entries, 1, "controllers log through the app's logger")
	assert.Equal(t, "rollout", entries[0].LoggerName)
	assert.Equal(t, "rollout", entries[0].ContextMap()["controller"])
}

func TestProvideKeepsWithLogger(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	var controllers fxcontroller.Controllers
	fxtest.New(t,
		fx.Supply(zap.NewNop()),
		fxstore.Module,
		fxcontroller.Collect,
		fxcontroller.Provide(func(stores *fxstore.Registry) (*fxcontroller.Controller, error) {
			cms, err := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{})
			if err != nil {
				return nil, err
			}
			return fxcontroller.New("own-logger", cms, noop, fxcontroller.WithLogger(zap.New(core)))
		}),
		fx.Populate(&controllers),
	)
	controllers[0].Logger().Info("hello")
	assert.Equal(t, 1, logs.FilterMessage("hello").Len())
}

func TestProvideFailsFxNew(t *testing.T) {
	tests := []struct {
		name string
		give fx.Option
		want []string
	}{
		{
			name: "duplicate names",
			give: fx.Options(
				fx.Module("rollout", fxcontroller.Provide(newRollout)),
				fx.Module("other", fxcontroller.Provide(newOtherRollout)),
			),
			want: []string{`controller name "rollout" is used by both fxcontroller_test.newOtherRollout and fxcontroller_test.newRollout`},
		},
		{
			name: "not a function",
			give: fxcontroller.Provide(42),
			want: []string{"fxcontroller.Provide(int): got int; want a function returning *fxcontroller.Controller"},
		},
		{
			name: "returns something else",
			give: fxcontroller.Provide(func() (*fxstore.Registry, error) { return nil, nil }),
			want: []string{"returns (*fxstore.Registry, error); want *fxcontroller.Controller, or *fxcontroller.Controller and error"},
		},
		{
			name: "nil controller",
			give: fxcontroller.Provide(func() *fxcontroller.Controller { return nil }),
			want: []string{"returned a nil *Controller"},
		},
		{
			name: "constructor error",
			give: fxcontroller.Provide(func(stores *fxstore.Registry) (*fxcontroller.Controller, error) {
				cms, _ := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{LabelSelector: "=="})
				return fxcontroller.New("broken", cms, noop)
			}),
			want: []string{`controller "broken": primary store is nil`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := fx.New(fx.NopLogger, fxstore.Module, fxcontroller.Collect, tt.give)
			require.Error(t, app.Err())
			for _, want := range tt.want {
				assert.ErrorContains(t, app.Err(), want)
			}
		})
	}
}

// apiServer counts requests and accepts events.k8s.io Events.
type apiServer struct {
	*httptest.Server

	mu       sync.Mutex
	requests []string
	events   []eventsv1.Event
}

func newAPIServer(t *testing.T) *apiServer {
	s := &apiServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.requests = append(s.requests, r.Method+" "+r.URL.Path)
		// Clients of built-in types send protobuf.
		obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if e, ok := obj.(*eventsv1.Event); ok && err == nil && r.Method == http.MethodPost {
			s.events = append(s.events, *e)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(e)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) seen() ([]string, []eventsv1.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...), append([]eventsv1.Event(nil), s.events...)
}

func TestModule(t *testing.T) {
	server := newAPIServer(t)
	var (
		c         client.Client
		recorders fxcontroller.RecorderProvider
	)
	app := fxtest.New(t,
		fx.Supply(&rest.Config{Host: server.URL}),
		fxstore.Module,
		fxcontroller.Module,
		fx.Populate(&c, &recorders),
	)
	rec := recorders.GetEventRecorder("rollout")
	cm := testenv.ConfigMap("a", "x")
	rec.Eventf(cm, nil, corev1.EventTypeNormal, "Early", "Test", "dropped: not started")
	requests, _ := server.seen()
	assert.Empty(t, requests, "building the client and recorders does no I/O")

	app.RequireStart()
	rec.Eventf(cm, nil, corev1.EventTypeNormal, "Synced", "Sync", "%d keys", 3)
	require.Eventually(t, func() bool { _, events := server.seen(); return len(events) == 1 }, 5*time.Second, 10*time.Millisecond)
	_, events := server.seen()
	assert.Equal(t, "rollout", events[0].ReportingController)
	assert.Equal(t, "Synced", events[0].Reason)
	assert.Equal(t, "3 keys", events[0].Note)
	assert.Equal(t, "x", events[0].Regarding.Name)
	assert.Equal(t, "a", events[0].Namespace)

	app.RequireStop()
	rec.Eventf(cm, nil, corev1.EventTypeNormal, "Late", "Test", "dropped: stopped")
	time.Sleep(50 * time.Millisecond)
	requests, events = server.seen()
	assert.Len(t, events, 1, "events are dropped before start and after stop")
	assert.Equal(t, []string{"POST /apis/events.k8s.io/v1/namespaces/a/events"}, requests)
	assert.True(t, c.Scheme().IsGroupRegistered("apps"), "the client uses the app's scheme")
}

package fxcontrollertest_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const keysAnnotation = "example.com/keys"

// counter annotates each ConfigMap with how many keys it has. It reads
// through its store and writes through the client.
type counter struct {
	configMaps *fxstore.Store[*corev1.ConfigMap]
	client     client.Client
	recorder   events.EventRecorder
}

func (c *counter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cm, err := c.configMaps.Get(req.Namespace, req.Name)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if cm.Data["invalid"] != "" {
		return reconcile.Result{}, reconcile.TerminalError(errors.New("invalid key"))
	}
	keys := strconv.Itoa(len(cm.Data))
	if cm.Annotations[keysAnnotation] == keys {
		return reconcile.Result{}, nil
	}
	cm = cm.DeepCopy() // the store's object is shared: copy before changing it
	metav1.SetMetaDataAnnotation(&cm.ObjectMeta, keysAnnotation, keys)
	if err := c.client.Update(ctx, cm); err != nil {
		return reconcile.Result{}, err
	}
	c.recorder.Eventf(cm, nil, corev1.EventTypeNormal, "Counted", "Count", "%s keys", keys)
	return reconcile.Result{}, nil
}

var counterModule = fx.Module("counter", fxcontroller.Provide(newCounter))

func newCounter(stores *fxstore.Registry, c client.Client, events fxcontroller.RecorderProvider) (*fxcontroller.Controller, error) {
	cms, err := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{})
	if err != nil {
		return nil, err
	}
	return fxcontroller.New("counter", cms,
		&counter{configMaps: cms, client: c, recorder: events.GetEventRecorder("counter")},
		fxcontroller.Writes(corev1.Resource("configmaps"), "update"))
}

func TestReconcileTable(t *testing.T) {
	tests := []struct {
		name       string
		give       []client.Object
		key        string
		wantErr    string
		wantKeys   string // the annotation afterwards; "" for none
		wantEvents []string
	}{
		{
			name:       "annotates",
			give:       []client.Object{testenv.ConfigMap("default", "a", testenv.Data{"x": "1", "y": "2"})},
			key:        "a",
			wantKeys:   "2",
			wantEvents: []string{"Normal Counted ConfigMap default/a: 2 keys"},
		},
		{
			name:     "already annotated",
			give:     []client.Object{testenv.ConfigMap("default", "a", testenv.Annotations{keysAnnotation: "0"})},
			key:      "a",
			wantKeys: "0",
		},
		{
			name: "gone",
			key:  "a",
		},
		{
			name:    "invalid",
			give:    []client.Object{testenv.ConfigMap("default", "a", testenv.Data{"invalid": "yes"})},
			key:     "a",
			wantErr: "terminal error: invalid key",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := fxcontrollertest.New(t, counterModule, tt.give...)
			key := client.ObjectKey{Namespace: "default", Name: tt.key}

			_, err := app.Reconcile(t.Context(), "counter", key)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				assert.ErrorIs(t, err, reconcile.TerminalError(nil))
			} else {
				require.NoError(t, err)
			}

			var got corev1.ConfigMap
			if err := app.Client().Get(t.Context(), key, &got); !apierrors.IsNotFound(err) {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantKeys, got.Annotations[keysAnnotation])
			var events []string
			for _, e := range app.Events() {
				assert.Equal(t, "counter", e.Controller)
				events = append(events, e.String())
			}
			assert.Equal(t, tt.wantEvents, events)
		})
	}
}

func TestStoresSeeWrites(t *testing.T) {
	app := fxcontrollertest.New(t, counterModule, testenv.ConfigMap("default", "a", testenv.Data{"x": "1"}))
	key := client.ObjectKey{Namespace: "default", Name: "a"}
	_, err := app.Reconcile(t.Context(), "counter", key)
	require.NoError(t, err)

	require.Len(t, app.Registry().Stores(), 1)

	// The reconciler's write reaches its store; a reconcile that reads the
	// store before then fails to update (conflict), and one after has
	// nothing to do.
	assert.Eventually(t, func() bool {
		_, err := app.Reconcile(t.Context(), "counter", key)
		return err == nil && len(app.Events()) == 1
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "Normal Counted ConfigMap default/a: 1 keys", app.Events()[0].String())
	assert.Equal(t, "counter", app.Controller("counter").Name())
}

func TestRecorder(t *testing.T) {
	rec := fxcontrollertest.NewRecorder(clientgoscheme.Scheme)
	cm := testenv.ConfigMap("default", "a")
	cm.UID = "uid-a"
	related := testenv.ConfigMap("default", "b")
	rec.GetEventRecorder("x").Eventf(cm, related, corev1.EventTypeWarning, "Failed", "Sync", "%d of %d", 1, 2)
	rec.GetEventRecorder("y").AnnotatedEventf(cm, nil, map[string]string{"k": "v"}, corev1.EventTypeNormal, "Synced", "Sync", "done")

	assert.Equal(t, []fxcontrollertest.Event{
		{
			Controller: "x",
			Regarding:  corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: "default", Name: "a", UID: "uid-a"},
			Related:    &corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: "default", Name: "b"},
			Type:       corev1.EventTypeWarning, Reason: "Failed", Action: "Sync", Note: "1 of 2",
		},
		{
			Controller: "y",
			Regarding:  corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: "default", Name: "a", UID: "uid-a"},
			Type:       corev1.EventTypeNormal, Reason: "Synced", Action: "Sync", Note: "done",
			Annotations: map[string]string{"k": "v"},
		},
	}, rec.Events())
}

// TestModuleRunsControllers runs a controller whose secondary watch maps
// owned objects to their owner with the fake client's REST mapper, under
// the app's lifecycle.
func TestModuleRunsControllers(t *testing.T) {
	owner := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "owner", UID: "uid-1"}}
	reconciled := make(chan reconcile.Request, 10)
	var src *fxstoretest.Source
	app := fxtest.New(t,
		fxstoretest.Module(owner),
		fxcontrollertest.Module,
		fxcontroller.Provide(func(stores *fxstore.Registry, c client.Client) (*fxcontroller.Controller, error) {
			secrets, err := fxstore.For[*corev1.Secret](stores, fxstore.Spec{})
			if err != nil {
				return nil, err
			}
			cms, err := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{})
			if err != nil {
				return nil, err
			}
			return fxcontroller.New("owners", secrets,
				reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
					reconciled <- req
					return reconcile.Result{}, nil
				}),
				fxcontroller.Watches(cms, handler.EnqueueRequestForOwner(c.Scheme(), c.RESTMapper(), &corev1.Secret{}, handler.OnlyControllerOwner())))
		}),
		fx.Populate(&src),
	)
	app.RequireStart()
	defer app.RequireStop()

	want := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(owner)}
	assert.Equal(t, want, <-reconciled)
	owned := testenv.ConfigMap("default", "owned")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: "owner", UID: "uid-1", Controller: new(true)}}
	require.NoError(t, src.Client().Create(t.Context(), owned))
	select {
	case got := <-reconciled:
		assert.Equal(t, want, got)
	case <-time.After(5 * time.Second):
		t.Fatal("the owner was not reconciled when the object it owns was created")
	}
}

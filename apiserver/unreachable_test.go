package apiserver_test

import (
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
)

// An API server that nothing answers at fails start-up with one message
// that names its address and says what to check, not one line per store.
func TestStartReportsAnUnreachableAPIServerOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // so that connecting is refused
	conn, err := connection.New(&rest.Config{Host: "https://" + addr}, clientgoscheme.Scheme)
	require.NoError(t, err)

	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	_, err = fxstore.For[*corev1.Secret](r, fxstore.Spec{Namespace: "team-a"})
	require.NoError(t, err)
	_, err = fxstore.For[*appsv1.Deployment](r, fxstore.Spec{})
	require.NoError(t, err)
	err = r.Start(t.Context(), apiserver.NewSource(conn.Client))
	defer r.Stop()

	require.EqualError(t, err, "cannot reach the API server at https://"+addr+": dial tcp "+addr+": connect: connection refused; "+
		"check that --kubeconfig (or $KUBECONFIG) names the right cluster and that its API server is up")
	unreachable, ok := errors.AsType[*apiserver.UnreachableError](err)
	require.True(t, ok, "%T", err)
	assert.Equal(t, "https://"+addr, unreachable.Server)
}

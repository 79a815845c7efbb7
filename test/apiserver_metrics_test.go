package test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/internal/testenv"
)

// scrapeRequests reads, from the API server's own /metrics, the requests it
// has served for resource.
func scrapeRequests(t *testing.T, cfg *rest.Config, resource string) testenv.APIRequests {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	r, err := testenv.ScrapeAPIRequests(t.Context(), kube.RESTClient(), resource)
	require.NoError(t, err)
	return r
}

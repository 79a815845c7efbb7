package bench

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/internal/testenv"
)

// workloadResources are the resources the workload's stores list and watch.
var workloadResources = []string{"configmaps", "secrets", "deployments"}

// scrapeRequests reads the API server's requests for the workload's
// resources from its /metrics.
func scrapeRequests(ctx context.Context, rc rest.Interface) (testenv.APIRequests, error) {
	return testenv.ScrapeAPIRequests(ctx, rc, workloadResources...)
}

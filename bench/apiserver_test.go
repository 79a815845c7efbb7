package bench

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// workloadResources are the resources the workload's stores list and watch.
var workloadResources = []string{"configmaps", "secrets", "deployments"}

// apiRequests counts requests for the workload's resources, read from the API
// server's own /metrics.
type apiRequests struct {
	Lists       float64 // apiserver_request_total{verb="LIST"}
	Watches     float64 // apiserver_request_total{verb="WATCH"}: watches that ended
	OpenWatches float64 // apiserver_longrunning_requests{verb="WATCH"}
}

func (a apiRequests) minus(b apiRequests) apiRequests {
	return apiRequests{Lists: a.Lists - b.Lists, Watches: a.Watches - b.Watches, OpenWatches: a.OpenWatches - b.OpenWatches}
}

// scrapeRequests reads the API server's /metrics through rc, whose user must
// be allowed to (system:masters is). A streaming list (a watch with
// sendInitialEvents) counts as a WATCH there, not as a LIST.
func scrapeRequests(ctx context.Context, rc rest.Interface) (apiRequests, error) {
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiRequests{}, fmt.Errorf("scrape the API server's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return apiRequests{}, fmt.Errorf("parse the API server's metrics: %w", err)
	}
	var r apiRequests
	sum := func(family, verb string, into *float64) {
		f, ok := families[family]
		if !ok {
			return
		}
		for _, m := range f.GetMetric() {
			var gotVerb, resource, subresource string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "verb":
					gotVerb = l.GetValue()
				case "resource":
					resource = l.GetValue()
				case "subresource":
					subresource = l.GetValue()
				}
			}
			if gotVerb != verb || subresource != "" || !slices.Contains(workloadResources, resource) {
				continue
			}
			if m.Counter != nil {
				*into += m.GetCounter().GetValue()
			} else {
				*into += m.GetGauge().GetValue()
			}
		}
	}
	sum("apiserver_request_total", "LIST", &r.Lists)
	sum("apiserver_request_total", "WATCH", &r.Watches)
	sum("apiserver_longrunning_requests", "WATCH", &r.OpenWatches)
	return r, nil
}

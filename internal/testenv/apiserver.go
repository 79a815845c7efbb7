package testenv

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// APIRequests counts requests the API server has served for some resources,
// from its own /metrics.
type APIRequests struct {
	Lists       float64 // apiserver_request_total{verb="LIST"}
	Watches     float64 // apiserver_request_total{verb="WATCH"}: watches that ended
	OpenWatches float64 // apiserver_longrunning_requests{verb="WATCH"}
}

// Minus returns a - b, the requests made between two scrapes.
func (a APIRequests) Minus(b APIRequests) APIRequests {
	return APIRequests{Lists: a.Lists - b.Lists, Watches: a.Watches - b.Watches, OpenWatches: a.OpenWatches - b.OpenWatches}
}

// ScrapeAPIRequests reads the API server's /metrics through rc, whose user
// must be allowed to (system:masters is), and sums the requests for
// resources. A streaming list (a watch with sendInitialEvents) counts as a
// WATCH there, not as a LIST.
func ScrapeAPIRequests(ctx context.Context, rc rest.Interface, resources ...string) (APIRequests, error) {
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return APIRequests{}, fmt.Errorf("scrape the API server's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return APIRequests{}, fmt.Errorf("parse the API server's metrics: %w", err)
	}
	var r APIRequests
	sum := func(family, verb string, into *float64) {
		for _, m := range families[family].GetMetric() {
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
			if gotVerb != verb || subresource != "" || !slices.Contains(resources, resource) {
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

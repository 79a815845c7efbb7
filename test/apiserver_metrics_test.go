package test

import (
	"bytes"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiRequests reads, from the API server's own /metrics, how many LIST
// requests it has served for resource and how many WATCH requests on it are
// open now.
type apiRequests struct {
	Lists       float64 // apiserver_request_total{verb="LIST"}
	OpenWatches float64 // apiserver_longrunning_requests{verb="WATCH"}
	Watches     float64 // apiserver_request_total{verb="WATCH"}: finished watches
}

func scrapeRequests(t *testing.T, cfg *rest.Config, resource string) apiRequests {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	raw, err := kube.RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	require.NoError(t, err)

	var r apiRequests
	sum := func(family, verb string, into *float64) {
		f, ok := families[family]
		if !ok {
			return
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["verb"] != verb || labels["resource"] != resource || labels["subresource"] != "" {
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
	return r
}

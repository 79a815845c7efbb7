package reliability

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/modules/mirror"
	"github.com/fxkube/fxkube/modules/rollout"
)

// newLogger returns a logger that writes entries at level and above to the
// test's log and keeps every entry, at any level, for the test to assert on.
func newLogger(t *testing.T, level zapcore.Level) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	testCore := zaptest.NewLogger(t, zaptest.Level(level)).Core()
	return zap.New(zapcore.NewTee(testCore, core)), logs
}

// exampleApp is the app cmd/app builds, rollout and mirror, with handles on
// the stores they share, requested here with the same specs.
type exampleApp struct {
	*fxtest.App
	Registry    *fxstore.Registry
	ConfigMaps  *fxstore.Store[*corev1.ConfigMap]
	Secrets     *fxstore.Store[*corev1.Secret]
	Deployments *fxstore.Store[*appsv1.Deployment]
	Namespaces  *fxstore.Store[*metav1.PartialObjectMetadata]
}

func newExampleApp(t *testing.T, cfg *rest.Config, lc lifecycle.Config, log *zap.Logger) *exampleApp {
	t.Helper()
	a := &exampleApp{}
	a.App = testenv.App(t, cfg, lc, log,
		fxcontroller.Module, rollout.Module, mirror.Module,
		fx.Invoke(func(r *fxstore.Registry) (err error) {
			a.Registry = r
			if a.ConfigMaps, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}); err != nil {
				return err
			}
			if a.Secrets, err = fxstore.For[*corev1.Secret](r, fxstore.Spec{}); err != nil {
				return err
			}
			if a.Deployments, err = fxstore.For[*appsv1.Deployment](r, fxstore.Spec{}); err != nil {
				return err
			}
			a.Namespaces, err = fxstore.For[*metav1.PartialObjectMetadata](r,
				fxstore.Spec{Kind: corev1.SchemeGroupVersion.WithKind("Namespace")})
			return err
		}),
	)
	require.Len(t, a.Registry.Stores(), 4, "the example modules and this test share four stores")
	return a
}

// newClient is a client for cfg that reads from the API server.
func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	require.NoError(t, err)
	return c
}

// metricFamilies are metrics by name.
type metricFamilies map[string]*dto.MetricFamily

// gatherMetrics reads the process's controller-runtime metrics registry,
// which the app's /metrics serves.
func gatherMetrics(t *testing.T) metricFamilies {
	t.Helper()
	return gatherFrom(t, metrics.Registry)
}

func gatherFrom(t *testing.T, g prometheus.Gatherer) metricFamilies {
	t.Helper()
	fams, err := g.Gather()
	require.NoError(t, err)
	out := make(metricFamilies, len(fams))
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// httpClient reads the app's endpoints. It keeps no connection open, which
// goleak would take for a leak.
var httpClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// scrapeMetrics reads the /metrics endpoint an app serves on addr.
func scrapeMetrics(t *testing.T, addr string) metricFamilies {
	t.Helper()
	resp, err := httpClient.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	require.NoError(t, err)
	return fams
}

// value returns the value of the metric name whose labels include labels,
// summed over the series that match; 0 when there are none.
func (m metricFamilies) value(name string, labels map[string]string) float64 {
	var sum float64
	for _, metric := range m[name].GetMetric() {
		if !hasLabels(metric, labels) {
			continue
		}
		switch {
		case metric.Counter != nil:
			sum += metric.GetCounter().GetValue()
		case metric.Gauge != nil:
			sum += metric.GetGauge().GetValue()
		case metric.Histogram != nil:
			sum += float64(metric.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

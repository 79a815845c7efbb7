package connection

import (
	"fmt"
	"net/http"

	"go.uber.org/fx"
	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Connection is the app's API server and what talks to it.
type Connection struct {
	// Config points at the API server; do not change it.
	Config *rest.Config
	// HTTPClient carries every request of the app, so they share its
	// connection pool and rate limiter.
	HTTPClient *http.Client
	// Mapper maps kinds to resources, discovering them on first use.
	Mapper meta.RESTMapper
	// Client reads from and writes to the API server directly, and
	// watches; it is uncached.
	Client client.WithWatch
	// NewClient makes the other clients of the connection, such as a
	// hosted operator's cached client, from Config and options naming
	// HTTPClient, Mapper and a cache reader. Defaults to controller-runtime's
	// client.New; tests replace it to write to a fake.
	NewClient client.NewClientFunc
}

// Module provides the app's *Connection, built from the app's *rest.Config
// and *runtime.Scheme.
var Module = fx.Module("connection", fx.Provide(New))

// New connects to the API server cfg points at, with the Go types of
// scheme. It does no I/O.
func New(cfg *rest.Config, scheme *k8sruntime.Scheme) (*Connection, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("http client for %s: %w", cfg.Host, err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("rest mapper for %s: %w", cfg.Host, err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{HTTPClient: hc, Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return &Connection{Config: cfg, HTTPClient: hc, Mapper: mapper, Client: c, NewClient: client.New}, nil
}

package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"go.uber.org/fx"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
)

// webhooksGroup is the fx value group of WebhookHandlers that the app's
// webhook server serves.
const webhooksGroup = "fxkube.webhooks"

// WebhookHandler is an admission or conversion webhook served at Path.
type WebhookHandler struct {
	Path    string
	Handler http.Handler
}

// Webhook adds handler to the app's webhook server at path: an admission
// webhook (controller-runtime's admission.WithDefaulter, WithValidator, or
// any admission.Webhook) or a conversion webhook. A handler that needs
// values of the graph (the scheme, a client) is registered from an
// fx.Invoke with Webhooks.Register instead.
func Webhook(path string, handler http.Handler) fx.Option {
	return fx.Supply(fx.Annotated{Group: webhooksGroup, Target: WebhookHandler{Path: path, Handler: handler}})
}

// Webhooks is the app's admission and conversion webhook server:
// controller-runtime's webhook.Server, with certificates from a directory
// that are reloaded when they change (controller-runtime's certwatcher).
// lifecycle starts it before any store lists, as controller-runtime's
// manager does, because a store of a multi-version CRD whose storage
// version is not the one it watches cannot sync until the conversion
// webhook answers; it stops it with the other servers, after the stores.
// It runs only when a webhook is registered: an app without one opens no
// port. Its readiness is on /readyz as the check "webhooks".
//
// Its TLS settings are the app's (Config.TLS, EnableHTTP2), then those
// modules add with WebhookTLS.
//
// Every module registers on this one server, and converters on its one
// conversion registry. Each hosted controller-runtime operator
// (fxcontroller.SetupWithManager: mgr.GetWebhookServer,
// ctrl.NewWebhookManagedBy) registers through its own view, Operator, which
// holds only its own paths. Registrations are made while the app is built.
//
// A path registered by several operators is served by one handler that
// runs each operator's admission webhook, in the order registered:
//   - defaulters: each sees the object as the previous ones patched it, and
//     the response carries one JSON patch, their patches in order;
//   - validators: each is called; the first denial is the answer;
//   - warnings of all are returned.
//
// What cannot be combined fails the app's build, naming the path and both
// registrants: one registrant registering a path twice, or a path whose
// handlers are not all admission webhooks (*admission.Webhook), such as a
// conversion webhook at a path of its own. /convert is one handler over
// the app's scheme and conversion registry, so it serves every
// operator's converters, and one registration serves all.
type Webhooks struct {
	server     webhook.Server
	converters conversion.Registry
	addr       string

	mu      sync.Mutex
	paths   []string                // in the order registered
	entries map[string]*webhookPath // by path
	errs    []error
	started bool
}

var _ webhook.Server = (*Webhooks)(nil)

// NewWebhooks returns the webhook server cfg configures, with handlers
// registered.
func NewWebhooks(cfg Config, handlers ...WebhookHandler) (*Webhooks, error) {
	return newWebhookServer(cfg, nil, handlers)
}

// newWebhookServer returns the webhook server cfg configures, with the
// modules' TLS options and handlers.
func newWebhookServer(cfg Config, opts []WebhookTLSOption, handlers []WebhookHandler) (*Webhooks, error) {
	tlsOpts, err := cfg.webhookTLS(opts)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	w := &Webhooks{
		server: webhook.NewServer(webhook.Options{
			Host:     cfg.Webhook.Host,
			Port:     cfg.Webhook.Port,
			CertDir:  cfg.Webhook.Cert.Path,
			CertName: cfg.Webhook.Cert.Name,
			KeyName:  cfg.Webhook.Cert.Key,
			TLSOpts:  tlsOpts,
		}),
		converters: conversion.NewRegistry(),
		entries:    map[string]*webhookPath{},
		addr:       fmt.Sprintf("%s:%d", cfg.Webhook.Host, cfg.Webhook.Port),
	}
	for _, h := range handlers {
		w.Register(h.Path, h.Handler)
	}
	return w, w.Err()
}

type webhooksParams struct {
	fx.In

	Config   Config             `optional:"true"`
	Handlers []WebhookHandler   `group:"fxkube.webhooks"`
	TLS      []WebhookTLSOption `group:"fxkube.webhook-tls"`
}

func newWebhooks(p webhooksParams) (*Webhooks, error) {
	return newWebhookServer(p.Config, p.TLS, p.Handlers)
}

// Register implements webhook.Server: hook is served at path once the app
// starts. Registering a path twice, or after the app has started, is an
// error that Err returns (controller-runtime's server panics). A hosted
// operator registers through its view, Operator.
func (w *Webhooks) Register(path string, hook http.Handler) {
	if err := w.register("", path, hook); err != nil {
		w.mu.Lock()
		w.errs = append(w.errs, err)
		w.mu.Unlock()
	}
}

// register serves hook at path for registrant (an operator's name, or ""
// for the app's modules), combining it with the handlers registered before
// it at path.
func (w *Webhooks) register(registrant, path string, hook http.Handler) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return fmt.Errorf("webhook %s registered after the app started; register webhooks while the app is built", path)
	}
	e, ok := w.entries[path]
	if !ok {
		e = &webhookPath{path: path}
		w.entries[path] = e
		w.paths = append(w.paths, path)
		w.server.Register(path, e)
	}
	return e.add(registrant, hook)
}

// Err returns what went wrong with registrations.
func (w *Webhooks) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.errs...)
}

// Paths returns the registered paths, in the order registered.
func (w *Webhooks) Paths() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.paths)
}

// WebhookInfo describes a path the app's webhook server serves.
type WebhookInfo struct {
	Path string
	// Type is "mutating" (a defaulter), "validating", "conversion",
	// "admission" (another admission webhook) or "http" (a plain
	// http.Handler).
	Type string
	// Operators are the hosted operators whose handlers serve the path, in
	// the order they run; "" stands for the app's modules.
	Operators []string
}

// Served returns the paths served, in the order registered.
func (w *Webhooks) Served() []WebhookInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	infos := make([]WebhookInfo, len(w.paths))
	for i, path := range w.paths {
		e := w.entries[path]
		infos[i] = WebhookInfo{Path: path, Type: e.typ(), Operators: slices.Clone(e.registrants)}
	}
	return infos
}

// ConverterRegistry is the app's conversion registry, which
// controller-runtime's webhook builder fills (a hosted manager's
// GetConverterRegistry) and the /convert handler reads.
func (w *Webhooks) ConverterRegistry() conversion.Registry { return w.converters }

// RegisterConversion serves the /convert webhook for scheme's convertible
// types (Hub and Convertible implementations, or kinds with a converter in
// ConverterRegistry), as controller-runtime's webhook builder registers it.
// It is registered once, however many modules ask.
func (w *Webhooks) RegisterConversion(scheme *k8sruntime.Scheme) {
	w.mu.Lock()
	_, registered := w.entries[convertPath]
	w.mu.Unlock()
	if !registered {
		w.Register(convertPath, conversion.NewWebhookHandler(scheme, w.converters))
	}
}

const convertPath = "/convert"

// Start implements webhook.Server. The app starts its webhook server; a
// module calling Start gets an error.
func (w *Webhooks) Start(context.Context) error {
	return errors.New("the app starts its webhook server; do not start it")
}

// NeedLeaderElection implements webhook.Server: webhooks serve on every
// replica.
func (w *Webhooks) NeedLeaderElection() bool { return false }

// StartedChecker implements webhook.Server: it passes once the server
// answers TLS handshakes, or always when no webhook is registered (nothing
// is served).
func (w *Webhooks) StartedChecker() healthz.Checker {
	return func(req *http.Request) error {
		if !w.serving() {
			return nil
		}
		return w.server.StartedChecker()(req)
	}
}

// WebhookMux implements webhook.Server.
func (w *Webhooks) WebhookMux() *http.ServeMux { return w.server.WebhookMux() }

func (w *Webhooks) serving() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.paths) > 0
}

// Operator returns the webhook server hosted operator name registers on:
// its paths are served by w, and its WebhookMux holds only its own, so
// that controller-runtime's webhook builder, which skips a path its
// server already handles, registers every path the operator webhooks.
// Err returns what went wrong with its registrations.
func (w *Webhooks) Operator(name string) *OperatorWebhooks {
	return &OperatorWebhooks{app: w, name: name, mux: http.NewServeMux()}
}

// OperatorWebhooks is a hosted operator's view of the app's webhook
// server (see Webhooks.Operator).
type OperatorWebhooks struct {
	app  *Webhooks
	name string

	mu   sync.Mutex
	mux  *http.ServeMux // the operator's own paths
	errs []error
}

var _ webhook.Server = (*OperatorWebhooks)(nil)

// Register implements webhook.Server: hook is served at path, with the
// other operators' handlers for path, once the app starts.
func (o *OperatorWebhooks) Register(path string, hook http.Handler) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.app.register(o.name, path, hook); err != nil {
		o.errs = append(o.errs, err)
		return
	}
	o.mux.Handle(path, hook)
}

// Err returns what went wrong with the operator's registrations.
func (o *OperatorWebhooks) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return errors.Join(o.errs...)
}

// WebhookMux implements webhook.Server: the operator's own paths. A
// handler added to it directly, not with Register, is not served.
func (o *OperatorWebhooks) WebhookMux() *http.ServeMux { return o.mux }

// Start implements webhook.Server. The app starts its webhook server; a
// module calling Start gets an error.
func (o *OperatorWebhooks) Start(ctx context.Context) error { return o.app.Start(ctx) }

// NeedLeaderElection implements webhook.Server: webhooks serve on every
// replica.
func (o *OperatorWebhooks) NeedLeaderElection() bool { return false }

// StartedChecker implements webhook.Server: the app's server's.
func (o *OperatorWebhooks) StartedChecker() healthz.Checker { return o.app.StartedChecker() }

// seal ends registration, as the app starts, and returns the paths to
// serve.
func (w *Webhooks) seal() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.started = true
	return slices.Clone(w.paths)
}

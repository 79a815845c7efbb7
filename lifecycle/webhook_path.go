package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
)

// webhookPath is what the app's webhook server serves at one path: the
// handler of its one registrant, or the admission webhooks of several,
// run in turn (see Webhooks).
type webhookPath struct {
	path        string
	registrants []string // in the order registered; "" is the app's modules
	handlers    []http.Handler
	served      http.Handler
}

// ServeHTTP serves the path. Registration ends before the server starts,
// so served no longer changes.
func (e *webhookPath) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	e.served.ServeHTTP(rw, r)
}

// add serves hook at the path for registrant too, or says why it cannot.
func (e *webhookPath) add(registrant string, hook http.Handler) error {
	if len(e.handlers) == 0 {
		e.registrants, e.handlers, e.served = []string{registrant}, []http.Handler{hook}, hook
		return nil
	}
	first := e.registrants[0]
	switch {
	case slices.Contains(e.registrants, registrant):
		return fmt.Errorf("webhook path %s registered twice by %s; each registrant has one handler for a path", e.path, registrantName(registrant))
	case e.path == convertPath && isConversion(hook) && isConversion(e.handlers[0]):
		// One /convert serves the app's scheme and conversion registry,
		// which hold every operator's converters.
		e.registrants = append(e.registrants, registrant)
		e.handlers = append(e.handlers, hook)
		return nil
	}
	for i, h := range append(slices.Clone(e.handlers), hook) {
		if _, ok := h.(*admission.Webhook); !ok {
			by := append(slices.Clone(e.registrants), registrant)[i]
			return fmt.Errorf("webhook path %s is registered by %s and by %s, and the handler of %s is %s, not an admission webhook (*admission.Webhook), so the two cannot be combined; serve one of them at a path of its own",
				e.path, registrantName(first), registrantName(registrant), registrantName(by), describeHandler(h))
		}
	}
	e.registrants = append(e.registrants, registrant)
	e.handlers = append(e.handlers, hook)
	hooks := make([]*admission.Webhook, len(e.handlers))
	for i, h := range e.handlers {
		hooks[i] = h.(*admission.Webhook)
	}
	e.served = &admission.Webhook{
		Handler:         admissionChain(hooks),
		WithContextFunc: withHTTPRequest,
	}
	return nil
}

// typ is the kind of webhook served (see WebhookInfo.Type).
func (e *webhookPath) typ() string {
	h := e.handlers[0]
	switch {
	case isConversion(h):
		return "conversion"
	case h == nil:
		return "http"
	}
	wh, ok := h.(*admission.Webhook)
	if !ok {
		return "http"
	}
	// controller-runtime's WithDefaulter and WithValidator, or the
	// builder's paths for them.
	name := reflect.TypeOf(wh.Handler).String()
	switch {
	case strings.Contains(name, "defaulterForType"), strings.HasPrefix(e.path, "/mutate-"):
		return "mutating"
	case strings.Contains(name, "validatorForType"), strings.HasPrefix(e.path, "/validate-"):
		return "validating"
	}
	return "admission"
}

// registrantName names a registrant in errors.
func registrantName(registrant string) string {
	if registrant == "" {
		return "the app's modules"
	}
	return fmt.Sprintf("hosted operator %q", registrant)
}

func describeHandler(h http.Handler) string {
	if isConversion(h) {
		return "a conversion webhook"
	}
	return fmt.Sprintf("%T", h)
}

// conversionType is the type of controller-runtime's conversion webhook
// handler, which is not exported.
var conversionType = reflect.TypeOf(conversion.NewWebhookHandler(k8sruntime.NewScheme(), conversion.NewRegistry()))

func isConversion(h http.Handler) bool { return h != nil && reflect.TypeOf(h) == conversionType }

// admissionChain runs several operators' admission webhooks for one
// request, as the API server would run several webhooks in turn:
//   - each webhook sees the object as the ones before it patched it;
//   - the first denial, or error, is the answer, with the warnings so far;
//   - otherwise the answer allows, with every warning, and one JSON patch:
//     the webhooks' patches in order, each relative to the object the one
//     before it left, so that applied in order they give the last object.
type admissionChain []*admission.Webhook

func (c admissionChain) Handle(ctx context.Context, req admission.Request) admission.Response {
	r, _ := ctx.Value(httpRequestKey{}).(*http.Request)
	var (
		ops      []json.RawMessage
		warnings []string
	)
	for _, wh := range c {
		hookCtx := ctx
		if wh.WithContextFunc != nil && r != nil {
			hookCtx = wh.WithContextFunc(ctx, r)
		}
		resp := wh.Handle(hookCtx, req) // its own panic recovery, logger, Complete
		warnings = append(warnings, resp.Warnings...)
		if !resp.Allowed {
			resp.Warnings, resp.Patches, resp.Patch, resp.PatchType = warnings, nil, nil, nil
			return resp
		}
		if len(resp.Patch) == 0 {
			continue
		}
		if resp.PatchType != nil && *resp.PatchType != admissionv1.PatchTypeJSONPatch {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("webhook returned a patch of type %s; only %s patches are combined", *resp.PatchType, admissionv1.PatchTypeJSONPatch))
		}
		var these []json.RawMessage
		if err := json.Unmarshal(resp.Patch, &these); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("decode a webhook's JSON patch: %w", err))
		}
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("decode a webhook's JSON patch: %w", err))
		}
		patched, err := patch.Apply(req.Object.Raw)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("apply a webhook's JSON patch: %w", err))
		}
		ops = append(ops, these...)
		req.Object = k8sruntime.RawExtension{Raw: patched}
	}
	resp := admission.Allowed("")
	resp.Warnings = warnings
	if len(ops) > 0 {
		patch, err := json.Marshal(ops)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode the combined JSON patch: %w", err))
		}
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
	return resp
}

type httpRequestKey struct{}

// withHTTPRequest keeps the webhook's HTTP request in ctx, for the
// WithContextFunc of each webhook combined.
func withHTTPRequest(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, httpRequestKey{}, r)
}

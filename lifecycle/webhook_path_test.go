package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/fxkube/fxkube/lifecycle"
)

// labeler defaults a Pod's label key to value, and its label "seen" to
// what it saw of the label "first".
type labeler struct{ key, value string }

func (l labeler) Default(_ context.Context, pod *corev1.Pod) error {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[l.key] = l.value
	if l.key != "first" {
		pod.Labels["seen"] = pod.Labels["first"]
	}
	return nil
}

// denier denies a Pod with its label, and warns of every Pod.
type denier struct{ label string }

func (d denier) ValidateCreate(_ context.Context, pod *corev1.Pod) (admission.Warnings, error) {
	if _, ok := pod.Labels[d.label]; ok {
		return admission.Warnings{"denied by " + d.label}, errors.New("label " + d.label + " is not allowed")
	}
	return admission.Warnings{"checked by " + d.label}, nil
}

func (d denier) ValidateUpdate(ctx context.Context, _, pod *corev1.Pod) (admission.Warnings, error) {
	return d.ValidateCreate(ctx, pod)
}

func (denier) ValidateDelete(context.Context, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
}

// review sends pod to path of the app's webhook mux, as the API server
// does, and returns the answer.
func review(t *testing.T, w *lifecycle.Webhooks, path string, pod *corev1.Pod) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("review"),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
	require.NoError(t, err)
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	w.WebhookMux().ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	require.NotNil(t, out.Response)
	assert.Equal(t, types.UID("review"), out.Response.UID)
	return out.Response
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	return s
}

// Two hosted operators defaulting and validating Pods at the paths
// controller-runtime's builder gives them: each registers, through its
// own view, and the one path runs both operators' webhooks.
func TestWebhooksCombineOperators(t *testing.T) {
	s := scheme(t)
	w, err := lifecycle.NewWebhooks(lifecycle.Config{})
	require.NoError(t, err)
	a, b := w.Operator("a"), w.Operator("b")
	a.Register("/mutate--v1-pod", admission.WithDefaulter[*corev1.Pod](s, labeler{"first", "a"}))
	a.Register("/validate--v1-pod", admission.WithValidator[*corev1.Pod](s, denier{"deny-a"}))
	// b's builder asks whether the paths are handled: not by b.
	for _, path := range []string{"/mutate--v1-pod", "/validate--v1-pod"} {
		_, pattern := b.WebhookMux().Handler(&http.Request{Method: http.MethodPost, URL: mustURL(t, path)})
		assert.Empty(t, pattern, "b's view does not handle %s", path)
		_, pattern = a.WebhookMux().Handler(&http.Request{Method: http.MethodPost, URL: mustURL(t, path)})
		assert.Equal(t, path, pattern, "a's view handles %s", path)
	}
	b.Register("/mutate--v1-pod", admission.WithDefaulter[*corev1.Pod](s, labeler{"second", "b"}))
	b.Register("/validate--v1-pod", admission.WithValidator[*corev1.Pod](s, denier{"deny-b"}))
	require.NoError(t, errors.Join(a.Err(), b.Err(), w.Err()))

	assert.Equal(t, []lifecycle.WebhookInfo{
		{Path: "/mutate--v1-pod", Type: "mutating", Operators: []string{"a", "b"}},
		{Path: "/validate--v1-pod", Type: "validating", Operators: []string{"a", "b"}},
	}, w.Served())

	t.Run("defaulters in order, one patch", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
		resp := review(t, w, "/mutate--v1-pod", pod)
		require.True(t, resp.Allowed, "%v", resp.Result)
		require.NotNil(t, resp.PatchType)
		assert.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		require.NoError(t, err)
		raw, err := json.Marshal(pod)
		require.NoError(t, err)
		patched, err := patch.Apply(raw)
		require.NoError(t, err)
		var got corev1.Pod
		require.NoError(t, json.Unmarshal(patched, &got))
		assert.Equal(t, map[string]string{"first": "a", "second": "b", "seen": "a"}, got.Labels,
			"b's defaulter saw a's default")
	})

	tests := []struct {
		name       string
		give       map[string]string
		wantDenied string
		wantWarn   []string
	}{
		{name: "both allow", wantWarn: []string{"checked by deny-a", "checked by deny-b"}},
		{name: "the first denies", give: map[string]string{"deny-a": ""}, wantDenied: "label deny-a is not allowed", wantWarn: []string{"denied by deny-a"}},
		{name: "the second denies", give: map[string]string{"deny-b": ""}, wantDenied: "label deny-b is not allowed", wantWarn: []string{"checked by deny-a", "denied by deny-b"}},
	}
	for _, tt := range tests {
		t.Run("validators: "+tt.name, func(t *testing.T) {
			resp := review(t, w, "/validate--v1-pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: tt.give}})
			assert.Equal(t, tt.wantDenied == "", resp.Allowed)
			if tt.wantDenied != "" {
				require.NotNil(t, resp.Result)
				assert.Contains(t, resp.Result.Message, tt.wantDenied)
			}
			assert.Empty(t, resp.Patch, "validators patch nothing")
			assert.Equal(t, tt.wantWarn, resp.Warnings)
		})
	}
}

// A path served by one registrant is served by its handler, unchanged.
func TestWebhooksOneRegistrantServedAsIs(t *testing.T) {
	s := scheme(t)
	w, err := lifecycle.NewWebhooks(lifecycle.Config{})
	require.NoError(t, err)
	w.Operator("a").Register("/mutate--v1-pod", admission.WithDefaulter[*corev1.Pod](s, labeler{"first", "a"}))
	resp := review(t, w, "/mutate--v1-pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}})
	require.True(t, resp.Allowed)
	assert.JSONEq(t, `[{"op":"add","path":"/metadata/labels","value":{"first":"a"}}]`, string(resp.Patch))
}

func TestWebhooksThatCannotCombine(t *testing.T) {
	s := scheme(t)
	convert := conversion.NewWebhookHandler(s, conversion.NewRegistry())
	defaulter := admission.WithDefaulter[*corev1.Pod](s, labeler{"first", "a"})
	plain := http.HandlerFunc(hello)
	tests := []struct {
		name    string
		give    func(w *lifecycle.Webhooks) error
		wantErr string
	}{
		{
			name: "one operator, one path twice",
			give: func(w *lifecycle.Webhooks) error {
				a := w.Operator("a")
				a.Register("/p", defaulter)
				a.Register("/p", defaulter)
				return a.Err()
			},
			wantErr: `webhook path /p registered twice by hosted operator "a"`,
		},
		{
			name: "plain handlers",
			give: func(w *lifecycle.Webhooks) error {
				w.Operator("a").Register("/p", plain)
				b := w.Operator("b")
				b.Register("/p", plain)
				return b.Err()
			},
			wantErr: `webhook path /p is registered by hosted operator "a" and by hosted operator "b", and the handler of hosted operator "a" is http.HandlerFunc, not an admission webhook`,
		},
		{
			name: "an admission webhook and a plain handler",
			give: func(w *lifecycle.Webhooks) error {
				w.Register("/p", defaulter)
				b := w.Operator("b")
				b.Register("/p", plain)
				return b.Err()
			},
			wantErr: `webhook path /p is registered by the app's modules and by hosted operator "b", and the handler of hosted operator "b" is http.HandlerFunc`,
		},
		{
			name: "conversion webhooks at a path of their own",
			give: func(w *lifecycle.Webhooks) error {
				w.Operator("a").Register("/convert-widgets", convert)
				b := w.Operator("b")
				b.Register("/convert-widgets", convert)
				return b.Err()
			},
			wantErr: `webhook path /convert-widgets is registered by hosted operator "a" and by hosted operator "b", and the handler of hosted operator "a" is a conversion webhook`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := lifecycle.NewWebhooks(lifecycle.Config{})
			require.NoError(t, err)
			assert.ErrorContains(t, tt.give(w), tt.wantErr)
		})
	}

	t.Run("/convert, once for all", func(t *testing.T) {
		w, err := lifecycle.NewWebhooks(lifecycle.Config{})
		require.NoError(t, err)
		w.Operator("a").Register("/convert", convert)
		b := w.Operator("b")
		b.Register("/convert", convert)
		require.NoError(t, errors.Join(b.Err(), w.Err()))
		assert.Equal(t, []lifecycle.WebhookInfo{{Path: "/convert", Type: "conversion", Operators: []string{"a", "b"}}}, w.Served())
	})
}

func mustURL(t *testing.T, path string) *url.URL {
	t.Helper()
	u, err := url.Parse(path)
	require.NoError(t, err)
	return u
}

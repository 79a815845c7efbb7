package rollout_test

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/fx"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/modules/rollout"
)

// A Deployment that opts in gets the hash of the ConfigMap it uses on its
// pod template, and a new hash when the ConfigMap changes. The in-memory
// fxstoretest and fxcontrollertest modules stand in for an API server.
//
// The hash of given data never changes across versions of the module:
// a new hash would roll out every opted-in Deployment.
func Example() {
	settings := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"},
		Data:       map[string]string{"greeting": "hello"},
	}
	web := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web",
			Annotations: map[string]string{rollout.ReloadAnnotation: "true"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "nginx", EnvFrom: []corev1.EnvFromSource{{
				ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}},
			}}}},
		}}},
	}
	var src *fxstoretest.Source
	app := fx.New(fx.NopLogger,
		fxstoretest.Module(web, settings),
		fxcontrollertest.Module,
		rollout.Module,
		fx.Populate(&src),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := app.Stop(context.Background()); err != nil {
			fmt.Println(err)
		}
	}()

	// hashAfter waits for the Deployment's hash to differ from previous.
	hashAfter := func(previous string) string {
		var d appsv1.Deployment
		for ctx.Err() == nil {
			if err := src.Client().Get(ctx, client.ObjectKeyFromObject(web), &d); err == nil {
				if h := d.Spec.Template.Annotations[rollout.ConfigHashAnnotation]; h != previous {
					return h
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		return "timed out"
	}
	first := hashAfter("")
	fmt.Println(first)

	settings.Data["greeting"] = "hi"
	if err := src.Client().Update(ctx, settings); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(hashAfter(first))
	// Output:
	// 520cc77b78f80b08b42c8015d5d21e1f523ef962dd871640b5e8d33fb4773704
	// f79fa4a57db049dd1961ce834d9baf88035672823725b79eb3a208ddb3aa8571
}

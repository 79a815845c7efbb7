package fxcontroller_test

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
)

// The app's Switch disables the version controller while the app runs,
// and enables it again.
func ExampleSwitch() {
	var (
		sw    *fxcontroller.Switch
		ctrls fxcontroller.Controllers
	)
	app := fx.New(
		fxstoretest.Module(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}),
		fxcontrollertest.Module,
		versionModule,
		fx.Populate(&sw, &ctrls),
	)
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = app.Stop(ctx) }()
	version := ctrls[0]

	// Disable returns once the controller has stopped.
	if err := sw.Disable(ctx, "version"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(version.Status()) // disabled
	// Enable lets it run again, with a new queue.
	if err := sw.Enable("version"); err != nil {
		fmt.Println(err)
		return
	}

	for range 500 {
		if version.Status().State == fxcontroller.Running {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println(version.Status())
	fmt.Println(sw.Disable(ctx, "versions"))
	// Output:
	// disabled
	// running
	// fxcontroller.Switch.Disable names ["versions"], which the app does not have; its controllers, their modules' packages and its hosted operators are ["fxcontroller_test" "version"]
}

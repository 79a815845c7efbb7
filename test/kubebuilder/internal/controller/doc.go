// Package controller is the operator's controller: it keeps each Task's
// Spec.Parallelism Jobs unfinished, written the way the kubebuilder book's
// CronJob tutorial writes a controller. Setup is what a kubebuilder
// cmd/main.go does with it.
package controller

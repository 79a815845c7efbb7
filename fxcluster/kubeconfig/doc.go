// Package kubeconfig engages member clusters from kubeconfigs: Secrets in
// the app's own cluster, and files named on the command line.
package kubeconfig

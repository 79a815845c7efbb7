// Package datahash hashes Kubernetes data, such as a ConfigMap's, with
// SHA-256 so that different data never hashes the same by construction:
// every string is length-prefixed and maps are written in key order.
package datahash

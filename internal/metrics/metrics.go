// Package metrics exports the platform's figures for Prometheus (docs/support.md). Stub: to be written.
package metrics

// Metrics holds the collectors; nil records nothing.
type Metrics struct{}

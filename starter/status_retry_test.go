package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

func TestDeploymentMessage(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    status.Deployment
		want string
	}{
		{"ready", status.Deployment{}, ""},
		{"plain message", status.Deployment{Message: "cluster c1: x"}, "cluster c1: x"},
		{"retried failure", status.Deployment{Message: "cluster c1: bundle a: denied", Attempts: 3, NextRetry: "2026-11-25T04:00:00Z"},
			"cluster c1: bundle a: denied (attempt 3 failed, next retry 2026-11-25T04:00:00Z)"},
		{"attempts without a time", status.Deployment{Attempts: 1}, "attempt 1 failed"},
	} {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, deploymentMessage(tt.d)) })
	}
}

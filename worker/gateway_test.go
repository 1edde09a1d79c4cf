package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGatewayFlags_Validate(t *testing.T) {
	for name, tc := range map[string]struct {
		flags gatewayFlags
		want  string
	}{
		"off":                   {gatewayFlags{}, ""},
		"plain":                 {gatewayFlags{Listen: ":7243", MaxConnections: 10}, ""},
		"TLS pair":              {gatewayFlags{Listen: ":7243", MaxConnections: 10, TLSCert: "c", TLSKey: "k"}, ""},
		"cert without key":      {gatewayFlags{Listen: ":7243", MaxConnections: 10, TLSCert: "c"}, "go together"},
		"no connections at all": {gatewayFlags{Listen: ":7243"}, "--gateway-max-connections"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.flags.validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	assert.Equal(t, "svc:7243", gatewayFlags{Listen: ":7243", Advertise: "svc:7243"}.address())
	assert.Equal(t, ":7243", gatewayFlags{Listen: ":7243"}.address(), "defaults to --gateway-listen")
}

package cluster

import (
	"testing"
)

// FuzzKubeconfig: no kubeconfig makes the checker or the controller's
// reader panic; whatever the checker accepts, the reader builds without a
// field dropped; and whatever the reader builds names no command, file or
// proxy. Seeded with the kubeconfigs of the table tests.
func FuzzKubeconfig(f *testing.F) {
	for _, tt := range kubeconfigCases {
		f.Add([]byte(tt.doc))
	}
	f.Add([]byte(""))
	f.Add([]byte("apiVersion: v1\nkind: Config\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkErr := CheckKubeconfig(data)
		cfg, ignored, err := SafeRESTConfig("fuzz", data)
		if checkErr == nil && len(ignored) > 0 {
			t.Fatalf("the checker accepted a kubeconfig whose fields %v the reader dropped", ignored)
		}
		if err != nil {
			return
		}
		if refs := restConfigReferences(cfg); len(refs) > 0 || cfg.AuthConfigPersister != nil {
			t.Fatalf("the REST configuration names %v", refs)
		}
	})
}

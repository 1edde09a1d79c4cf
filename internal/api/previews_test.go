package api_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

func TestDecode_Previews(t *testing.T) {
	const head = "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: app}\nspec:\n  repo: https://github.com/acme/app\n  previews: "
	tests := []struct {
		name     string
		previews string
		want     *api.PreviewsSpec
		wantErr  []string // substrings of the error; nil: valid
	}{
		{"minimal", "{secretName: gh-api}", &api.PreviewsSpec{SecretName: "gh-api"}, nil},
		{"all fields", "{secretName: gl, provider: gitlab, apiURL: 'https://gl.corp/api/v4'}",
			&api.PreviewsSpec{SecretName: "gl", Provider: "gitlab", APIURL: "https://gl.corp/api/v4"}, nil},
		{"no secret", "{provider: github}", nil, []string{"GitRepo fleet-default/app", "spec.previews.secretName: Required value"}},
		{"bad secret name", "{secretName: 'GH API'}", nil, []string{"spec.previews.secretName", "GH API"}},
		{"unknown provider", "{secretName: s, provider: bitbucket}", nil, []string{"spec.previews.provider", "Unsupported value", `"gitea"`}},
		{"apiURL not http", "{secretName: s, apiURL: 'ftp://h/api'}", nil, []string{"spec.previews.apiURL", "http(s)"}},
		{"apiURL with credentials", "{secretName: s, apiURL: 'https://bot:hunter2@h/api/v3'}", nil, []string{"spec.previews.apiURL", "secretName"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := api.Decode(strings.NewReader(head+tt.previews+"\n"), "in.yaml")
			if tt.wantErr != nil {
				require.Error(t, err)
				for _, w := range tt.wantErr {
					assert.Contains(t, err.Error(), w)
				}
				assert.NotContains(t, err.Error(), "hunter2")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, docs[0].GitRepo.Spec.Previews)
		})
	}
}

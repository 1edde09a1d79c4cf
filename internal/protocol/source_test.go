package protocol_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

func TestGitRepoSource_Commits(t *testing.T) {
	tests := []struct {
		name string
		src  protocol.GitRepoSource
		want []string
	}{
		{"none", protocol.GitRepoSource{}, nil},
		{"settled", protocol.GitRepoSource{Commit: "a", LatestCommit: "a"}, []string{"a"}},
		{"rolling out", protocol.GitRepoSource{RolloutCommit: "b", Commit: "a", LatestCommit: "b"}, []string{"b", "a"}},
		{"new commit not rolled out yet", protocol.GitRepoSource{Commit: "a", LatestCommit: "c"}, []string{"a", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.src.Commits())
		})
	}
}

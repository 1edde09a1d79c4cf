package api

import (
	"errors"
	"regexp"
)

// ErrHelmRepoURLRegexRequired marks a GitRepo that names helmSecretName
// without helmRepoURLRegex: its credentials would go to any chart URL a
// fleet.yaml names, so they go to none (Fleet 0.16 requires the regex
// too, fleet#5141).
var ErrHelmRepoURLRegexRequired = errors.New(
	"helmSecretName requires helmRepoURLRegex: set it to the chart URLs that may receive the credentials")

// HelmRepoURLPattern returns the pattern a chart URL must match, as a
// whole, to receive s.HelmSecretName's credentials: s.HelmRepoURLRegex
// anchored at both ends (^(?:re)$), so "https://good.example/.*" does not
// match "https://evil.example/?https://good.example/x". It returns nil
// without HelmSecretName, and ErrHelmRepoURLRegexRequired when a GitRepo
// names HelmSecretName without a regex. A HelmOp's GitRepo (s.HelmOp set)
// may omit the regex: the HelmOp names its chart's URL itself, so its
// author chooses where the credentials go; with one, the regex applies.
func HelmRepoURLPattern(s GitRepoSpec) (*regexp.Regexp, error) {
	switch {
	case s.HelmSecretName == "" && s.HelmRepoURLRegex == "":
		return nil, nil
	case s.HelmRepoURLRegex == "" && s.HelmOp != nil:
		return nil, nil
	case s.HelmRepoURLRegex == "":
		return nil, ErrHelmRepoURLRegexRequired
	}
	return regexp.Compile("^(?:" + s.HelmRepoURLRegex + ")$")
}

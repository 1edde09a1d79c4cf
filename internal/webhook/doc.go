// Package webhook matches Git push events, and pull (merge) request events
// for previews (PullRequest), to GitRepos. RepoKey reduces the
// many spellings of one repository (https, http, ssh, scp-like, git://,
// with or without ".git", any case, any port, Azure DevOps' "_git" and
// ssh "v3" forms, Bitbucket Server's "/scm" prefix) to one comparable key.
package webhook

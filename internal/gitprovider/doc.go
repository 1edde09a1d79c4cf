// Package gitprovider is a small REST client for the Git hosts Flotilla
// reports to: GitHub (and GitHub Enterprise Server's /api/v3), GitLab and
// Gitea. It sets commit statuses and creates or updates one marked comment
// on a pull (merge) request. The token is sent as each host expects
// (GitHub "Authorization: Bearer", GitLab "PRIVATE-TOKEN", Gitea
// "Authorization: token") and never appears in an error; redirects are not
// followed, so the token never leaves the API host.
package gitprovider

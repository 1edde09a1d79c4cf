// Package gitsource reads Git repositories over HTTP(S) with go-git: Resolve
// turns a GitRepo's branch or revision into a commit with one ls-remote, and
// Cache keeps one bare clone per remote URL and materialises clean,
// read-only-by-convention worktrees for single commits.
//
// Credentials never leave a Remote's Auth: userinfo in a URL is moved into
// Auth before go-git sees the URL, and every error and String names the URL
// without userinfo (api.RedactURL). Authentication failures are ErrAuth, missing
// branches, tags, revisions and commits are ErrRefNotFound, and a missing
// repository is ErrRepositoryNotFound, all for errors.Is.
//
// A worktree's files together are bounded by Cache.MaxCheckoutSize,
// checked while they are written (a *sizelimit.Error names the file at
// which the sum went over).
//
// Only the http and https transports are used; SSH remotes are not
// supported. Submodules are not checked out (their directory stays empty),
// as with a plain `git clone` without --recurse-submodules.
package gitsource

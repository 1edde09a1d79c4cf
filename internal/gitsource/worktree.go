package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// writeTree writes the files of commit below root, which must exist and be
// empty. Paths that could leave root (".." or ".git" components) and
// symbolic links that resolve outside root are errors, since the tree
// comes from an untrusted server. So are files that add up to more than
// size's limit: each blob's declared size is checked before it is read,
// and its bytes are counted while they are copied.
func writeTree(ctx context.Context, sto storer.EncodedObjectStorer, commit *object.Commit, root string, size *sizelimit.Budget) error {
	tree, err := commit.Tree()
	if err != nil {
		return fmt.Errorf("read tree: %w", corrupt(err))
	}
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	var links []string
	for {
		name, entry, err := walker.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("walk tree: %w", corrupt(err))
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("write tree: %w", err)
		}
		if err := checkTreePath(name); err != nil {
			return err
		}
		dst := filepath.Join(root, filepath.FromSlash(name))
		isLink, err := writeEntry(sto, entry, name, dst, size)
		if err != nil {
			return err
		}
		if isLink {
			links = append(links, dst)
		}
	}
	return confineLinks(root, links)
}

// writeEntry writes one tree entry to dst and reports whether it is a
// symbolic link.
func writeEntry(sto storer.EncodedObjectStorer, entry object.TreeEntry, name, dst string, size *sizelimit.Budget) (bool, error) {
	switch entry.Mode {
	case filemode.Dir, filemode.Submodule: // a submodule stays an empty directory
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return false, fmt.Errorf("create %s: %w", name, err)
		}
		return false, nil
	case filemode.Regular, filemode.Deprecated:
		return false, writeBlob(sto, entry, name, dst, 0o644, size)
	case filemode.Executable:
		return false, writeBlob(sto, entry, name, dst, 0o755, size)
	case filemode.Symlink:
		target, err := readBlob(sto, entry, name)
		if err != nil {
			return false, err
		}
		if filepath.IsAbs(target) || strings.ContainsRune(target, 0) {
			return false, fmt.Errorf("symlink %s: target %q is not a relative path", name, target)
		}
		if err := mkParent(dst, name); err != nil {
			return false, err
		}
		if err := os.Symlink(target, dst); err != nil {
			return false, fmt.Errorf("create symlink %s: %w", name, err)
		}
		return true, nil
	default:
		return false, fmt.Errorf("%s: unsupported file mode %s", name, entry.Mode)
	}
}

// checkTreePath rejects slash paths with components that git itself refuses
// to check out.
func checkTreePath(name string) error {
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." || strings.EqualFold(part, ".git") || strings.ContainsAny(part, "\\\x00") {
			return fmt.Errorf("tree path %q is not allowed", name)
		}
	}
	return nil
}

func mkParent(dst, name string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("create directory of %s: %w", name, err)
	}
	return nil
}

func writeBlob(sto storer.EncodedObjectStorer, entry object.TreeEntry, name, dst string, mode os.FileMode, size *sizelimit.Budget) error {
	blob, err := object.GetBlob(sto, entry.Hash)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, corrupt(err))
	}
	what := "the commit's files together, up to " + name
	if err := size.Check(what, size.Used()+blob.Size); err != nil {
		return err
	}
	if err := mkParent(dst, name); err != nil {
		return err
	}
	r, err := blob.Reader()
	if err != nil {
		return fmt.Errorf("read %s: %w", name, corrupt(err))
	}
	defer func() { _ = r.Close() }() // read-only
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := io.Copy(f, size.Reader(r, what)); err != nil {
		_ = f.Close() // the copy error is the one to report
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

func readBlob(sto storer.EncodedObjectStorer, entry object.TreeEntry, name string) (string, error) {
	blob, err := object.GetBlob(sto, entry.Hash)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, corrupt(err))
	}
	r, err := blob.Reader()
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, corrupt(err))
	}
	defer func() { _ = r.Close() }() // read-only
	b, err := io.ReadAll(io.LimitReader(r, 4096))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, corrupt(err))
	}
	return string(b), nil
}

// confineLinks fails when one of links, once every link is in place,
// resolves outside root. Checking targets one by one is not enough: "a ->
// l/.." with "l -> ." leaves root although both targets look harmless.
// Dangling links are allowed; reading them fails anyway.
func confineLinks(root string, links []string) error {
	if len(links) == 0 {
		return nil
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("resolve worktree root: %w", err)
	}
	for _, link := range links {
		rel, _ := filepath.Rel(root, link) // link is below root by construction
		real, err := filepath.EvalSymlinks(link)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("symlink %s: %w", filepath.ToSlash(rel), err)
		}
		if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
			return fmt.Errorf("symlink %s points outside the repository", filepath.ToSlash(rel))
		}
	}
	return nil
}

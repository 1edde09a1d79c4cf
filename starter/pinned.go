package main

import (
	"fmt"
	"io"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// printPinned prints the pin `flotilla rollback --to` set, and how to
// lift it.
func printPinned(w io.Writer, st status.GitRepo) {
	p := st.Pinned
	if p == nil {
		return
	}
	by := ""
	if p.By != "" {
		by = " by " + p.By
	}
	follows := "its branch"
	switch {
	case st.Revision != "":
		follows = "revision " + st.Revision
	case st.Branch != "":
		follows = st.Branch
	}
	fmt.Fprintf(w, "Pinned:   %s%s at %s (rollback); `flotilla resume %s` follows %s again\n",
		short(p.Commit), by, p.At.UTC().Format(time.RFC3339), st.Name, follows)
	if st.LatestCommit != "" && st.LatestCommit != p.Commit {
		fmt.Fprintf(w, "Newest:   %s on the remote, not rolled out while pinned\n", short(st.LatestCommit))
	}
}

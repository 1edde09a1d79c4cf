package plan

import (
	"fmt"
	"strings"
)

// GitHubCommentLimit is the largest comment GitHub accepts, in characters
// (GitLab's and Gitea's are larger); Markdown's max for PR comments.
const GitHubCommentLimit = 65536

// Markdown renders r for a pull request comment: a title with the summary,
// per cluster a table of its releases (action, deployment from → to) and
// per changed object a collapsed <details> block with its diff. Offline
// clusters and errors are marked. The text is cut at a block boundary to
// at most max bytes (max <= 0: no limit), with a note saying so. It shows
// what r holds: Secret values are redacted when the plan is made, not
// here.
func Markdown(r Result, max int) string {
	blocks := markdownBlocks(r)
	total := 0
	for _, b := range blocks {
		total += len(b)
	}
	if max <= 0 || total <= max {
		return strings.Join(blocks, "")
	}
	note := fmt.Sprintf("\n_The plan is %d bytes, more than a comment holds: the rest is left out. `flotilla plan %s --commit %s` shows all of it._\n",
		total, nameOf(r.GitRepo), r.Commit)
	var sb strings.Builder
	for _, b := range blocks {
		if sb.Len()+len(b)+len(note) > max {
			break
		}
		sb.WriteString(b)
	}
	if sb.Len()+len(note) > max { // even the title does not fit
		return cutBytes(note, max)
	}
	sb.WriteString(note)
	return sb.String()
}

// markdownBlocks are the comment's self-contained pieces, in order: a cut
// between two never leaves a fence or a <details> open.
func markdownBlocks(r Result) []string {
	title := fmt.Sprintf("### Flotilla plan for `%s` at `%s`", r.GitRepo, short(r.Commit))
	if r.Source != "" {
		title += " (" + r.Source + ")"
	}
	head := title + "\n\n**" + r.Summary() + "**"
	if r.Base != "" {
		head += fmt.Sprintf(", compared with `%s`", short(r.Base))
	}
	blocks := []string{head + "\n"}
	if len(r.Warnings) > 0 {
		var sb strings.Builder
		sb.WriteString("\n")
		for _, w := range r.Warnings {
			sb.WriteString("> ⚠️ " + oneLine(w) + "\n")
		}
		blocks = append(blocks, sb.String())
	}
	if len(r.Clusters) == 0 {
		blocks = append(blocks, "\nThe GitRepo targets no cluster.\n")
	}
	for _, c := range r.Clusters {
		blocks = append(blocks, clusterTable(c))
		for _, rel := range c.Releases {
			for _, o := range rel.Objects {
				if o.Change != NoChange || o.Error != "" {
					blocks = append(blocks, objectDetails(rel, o))
				}
			}
		}
	}
	return blocks
}

func clusterTable(c Cluster) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n#### Cluster `%s`", c.Name)
	if c.Offline {
		sb.WriteString(" — offline")
	}
	sb.WriteString("\n\n")
	if c.Offline {
		msg := "not reachable: planned from the offline render, without the API server's defaults, admission or immutable-field checks"
		if c.Reason != "" {
			msg += " (" + oneLine(c.Reason) + ")"
		}
		sb.WriteString("> 📴 " + msg + "\n\n")
	}
	if c.Error != "" {
		sb.WriteString("> ❌ " + oneLine(c.Error) + "\n\n")
	}
	if len(c.Releases) == 0 {
		if c.Error == "" {
			sb.WriteString("No releases.\n")
		}
		return sb.String()
	}
	sb.WriteString("| Bundle | Release | Action | From → To |\n|---|---|---|---|\n")
	for _, rel := range c.Releases {
		action := string(rel.Action)
		if rel.Error != "" {
			action = "❌ " + cell(rel.Error)
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s → %s |\n", code(rel.Bundle), code(rel.Namespace+"/"+rel.Release), action,
			orDash(short(rel.From)), orDash(short(rel.To)))
	}
	return sb.String()
}

func objectDetails(rel Release, o Object) string {
	id := o.Kind + " " + o.Name
	if o.Namespace != "" {
		id = o.Kind + " " + o.Namespace + "/" + o.Name
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n<details><summary>%s: %s %s</summary>\n\n", htmlEscape(rel.Bundle), o.Change, htmlEscape(id))
	if o.Error != "" {
		sb.WriteString("> ❌ " + oneLine(o.Error) + "\n\n")
	}
	if o.Diff != "" {
		fence := fenceFor(o.Diff)
		sb.WriteString(fence + "diff\n" + strings.TrimRight(o.Diff, "\n") + "\n" + fence + "\n\n")
	}
	sb.WriteString("</details>\n")
	return sb.String()
}

// fenceFor is a backtick fence longer than any run of backticks in s.
func fenceFor(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func nameOf(gitRepo string) string {
	if _, name, ok := strings.Cut(gitRepo, "/"); ok {
		return name
	}
	return gitRepo
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return code(s)
}

// code is an inline code span of s in a table cell.
func code(s string) string { return "`" + strings.ReplaceAll(cell(s), "`", "'") + "`" }

// cell makes s fit one table cell.
func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// cutBytes cuts s to at most n bytes without splitting a UTF-8 sequence.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

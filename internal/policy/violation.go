package policy

import (
	"errors"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// Violation is a spec a GitRepoRestriction or Policy refuses. Rule names
// the documents and the field ("Policy team-a/strict:
// gitRepo.allowedRepoPatterns"), Message what of the spec it refuses.
// It never holds a secret: specs name Secrets, they do not hold them.
type Violation struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
	// Class is outcome.Refused: not retried; a change of the spec or of
	// the policy lifts it.
	Class outcome.Class `json:"class"`
}

// Error is the rule followed by the message.
func (v *Violation) Error() string { return v.Rule + " " + v.Message }

// IsViolation reports whether err is, or wraps, a *Violation.
func IsViolation(err error) bool {
	var v *Violation
	return errors.As(err, &v)
}

func violation(rule, message string) *Violation {
	return &Violation{Rule: rule, Message: message, Class: outcome.Refused}
}

package memorybank

import (
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/redact"
)

// PIIRedaction is an app's redaction of personal data (package redact).
// With Enabled, every text sent to a model for extraction, consolidation
// or a session's compaction is redacted (redact.Generator), and so is
// every memory fact before it is stored, however it came (a direct fact,
// a model's reply, CreateMemory, UpdateMemory, a rollback), and every
// similarity search query before it is embedded. Session events and state
// are stored as given.
type PIIRedaction struct {
	Enabled bool
	// Rules say what is redacted (no categories: all of them).
	redact.Rules
}

// Redactor returns the redactor of the setting: nil (no redaction) when
// it is off.
func (p PIIRedaction) Redactor() (*redact.Redactor, error) {
	if !p.Enabled {
		return nil, nil
	}
	r, err := redact.New(p.Rules)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "the stored pii_redaction is not valid")
	}
	return r, nil
}

// redactFact returns a fact redacted by r (nil: unchanged), cut to
// MaxFactBytes where its placeholders made it longer than the limit.
func redactFact(r *redact.Redactor, fact string) string {
	if r == nil {
		return fact
	}
	out := r.Redact(fact)
	if len(out) > MaxFactBytes {
		out = aip.Truncate(out, MaxFactBytes-len("..."))
	}
	return out
}

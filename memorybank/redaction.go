package memorybank

import (
	"encoding/json"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/redact"
)

// maxRedactors bounds the redactors a Service keeps.
const maxRedactors = 64

// Redactor returns the redactor of an app's configuration: nil (no
// redaction) when its PIIRedaction is off. The redactors are kept by
// their rules, so that the paths that redact at every call (CreateMemory,
// RetrieveMemories) do not compile an app's patterns again each time
// (about 0.5 ms for 16 patterns).
func (s *Service) Redactor(cfg *appconfig.Config) (*redact.Redactor, error) {
	p := cfg.PIIRedaction
	if !p.Enabled {
		return nil, nil
	}
	key, err := json.Marshal(p.Rules)
	if err != nil {
		return nil, err
	}
	s.redactorMu.Lock()
	r, ok := s.redactors[string(key)]
	s.redactorMu.Unlock()
	if ok {
		return r, nil
	}
	if r, err = redact.New(p.Rules); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "the pii_redaction stored for app %s is not valid", cfg.App)
	}
	s.redactorMu.Lock()
	if len(s.redactors) >= maxRedactors {
		clear(s.redactors)
	}
	s.redactors[string(key)] = r
	s.redactorMu.Unlock()
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

// redactFields redacts the string values of the profile fields a reply
// gave, as the free facts are (an enum's values are the schema's own and
// stay as they are).
func redactFields(r *redact.Redactor, fields []profileCandidate) {
	if r == nil {
		return
	}
	for i := range fields {
		if v, ok := fields[i].value.(string); ok && len(fields[i].field.Enum) == 0 {
			out := r.Redact(v)
			if len(out) > profile.MaxValueBytes {
				out = aip.Truncate(out, profile.MaxValueBytes-len("..."))
			}
			fields[i].value = out
		}
	}
}

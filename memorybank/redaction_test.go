package memorybank_test

import (
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/redact"
)

// TestRedactor: an app's redactor is nil while redaction is off, kept for
// the same rules (not compiled at every call), another for other rules;
// stored rules that are not valid fail (nothing is sent unredacted).
func TestRedactor(t *testing.T) {
	s := memorybank.NewService(nil, memorybank.Config{})
	rules := redact.Rules{Patterns: []redact.Pattern{{Name: "EMPLOYEE_ID", Regex: `EMP-[0-9]{6}`}}}
	off := &appconfig.Config{App: "a", PIIRedaction: appconfig.Redaction{Rules: rules}}
	if r, err := s.Redactor(off); r != nil || err != nil {
		t.Fatalf("redaction off: %v, %v", r, err)
	}
	on := &appconfig.Config{App: "a", PIIRedaction: appconfig.Redaction{Enabled: true, Rules: rules}}
	r1, err := s.Redactor(on)
	if err != nil || r1.Redact("badge EMP-123456, ann@example.com") != "badge [EMPLOYEE_ID], [EMAIL]" {
		t.Fatalf("redactor %v, %v", r1, err)
	}
	again := *on
	again.App = "b"
	if r2, _ := s.Redactor(&again); r2 != r1 {
		t.Error("the same rules were compiled again")
	}
	other := &appconfig.Config{App: "a", PIIRedaction: appconfig.Redaction{Enabled: true, Rules: redact.Rules{Categories: []redact.Category{redact.Phone}}}}
	if r3, _ := s.Redactor(other); r3 == r1 || r3.Redact("ann@example.com") != "ann@example.com" {
		t.Error("other rules got the first redactor")
	}
	bad := &appconfig.Config{App: "c", PIIRedaction: appconfig.Redaction{Enabled: true, Rules: redact.Rules{Categories: []redact.Category{"NAME"}}}}
	if r, err := s.Redactor(bad); r != nil || !fault.Is(err, fault.Internal) || !strings.Contains(err.Error(), "app c") {
		t.Errorf("invalid stored rules: %v, %v", r, err)
	}
}

package resource_test

import (
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/resource"
)

// TestIDs: an id out of its syntax is refused naming the field and the
// first character that is not allowed; an email is a user id.
func TestIDs(t *testing.T) {
	for _, c := range []struct {
		id, extra, msg string
	}{
		{"", resource.AppIDChars, "is required"},
		{strings.Repeat("a", 129), resource.AppIDChars, "the limit is 128"},
		{"-a", resource.AppIDChars, "must start with an ASCII letter or digit"},
		{"\uff41bc", resource.AppIDChars, "U+FF41, not ASCII"},
		{"a\uff42c", resource.AppIDChars, "U+FF42, not ASCII) at byte 1"},
		{"a b", resource.AppIDChars, "U+0020 (a space or control character)"},
		{"a\xffb", resource.AppIDChars, "a byte that is not valid UTF-8"},
		{"a/b", resource.AppIDChars, `the character '/'`},
		{"ann@example.com", resource.AppIDChars, `the character '@'`},
	} {
		if err := resource.ValidateID("app id", c.id, c.extra); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "app id") {
			t.Errorf("ValidateID(%.20q) = %v, want INVALID_ARGUMENT naming the field and %q", c.id, err, c.msg)
		}
	}
	if err := resource.ValidateID("user id", "ann@example.com", resource.UserIDChars); err != nil {
		t.Errorf("an email as a user id: %v", err)
	}
}

// FuzzResourceNames checks that name parsing never panics, rejects what it
// cannot use with Invalid, and that whatever it accepts names exactly the
// resource it parsed.
func FuzzResourceNames(f *testing.F) {
	for _, s := range []string{
		"apps/a/users/u/sessions/s",
		"apps/a/users/u/sessions/s/",
		"apps//users/u/sessions/s",
		"apps/a/users/ann@example.com/sessions/s-1",
		"apps/a/users/-/sessions/s",
		"apps/../users/u/sessions/s",
		"apps/a/users/u/sessions/s\xff",
		"apps/a/state",
		"apps/a/users/u/state",
		"apps/a/users/-",
		"apps/a",
		"apps/a/memories/m",
		"apps/a/operations/o",
		"apps/a/memoryBankConfig",
		"",
	} {
		f.Add(s)
	}
	invalid := func(t *testing.T, what, name string, err error) {
		if fault.KindOf(err) != fault.Invalid {
			t.Fatalf("%s(%q): %v is not Invalid", what, name, err)
		}
	}
	f.Fuzz(func(t *testing.T, name string) {
		if app, user, session, err := resource.ParseSession("name", name); err != nil {
			invalid(t, "ParseSession", name, err)
		} else if got := resource.SessionName(app, user, session); got != name {
			t.Fatalf("ParseSession(%q) names %q", name, got)
		}
		if app, user, err := resource.ParseUserOrAll("parent", name); err != nil {
			invalid(t, "ParseUserOrAll", name, err)
		} else if user != "" && resource.UserName(app, user) != name || user == "" && name != resource.AppName(app) && name != resource.UserName(app, resource.AllUsers) {
			t.Fatalf("ParseUserOrAll(%q) = %q, %q", name, app, user)
		}
		if app, user, err := resource.ParseState("name", name); err != nil {
			invalid(t, "ParseState", name, err)
		} else if user == "" && resource.AppStateName(app) != name || user != "" && resource.UserStateName(app, user) != name {
			t.Fatalf("ParseState(%q) = %q, %q", name, app, user)
		}
		if app, m, err := resource.ParseMemory("name", name); err != nil {
			invalid(t, "ParseMemory", name, err)
		} else if resource.MemoryName(app, m) != name {
			t.Fatalf("ParseMemory(%q) = %q, %q", name, app, m)
		}
		if app, op, err := resource.ParseOperation("name", name); err != nil {
			invalid(t, "ParseOperation", name, err)
		} else if resource.OperationName(app, op) != name {
			t.Fatalf("ParseOperation(%q) = %q, %q", name, app, op)
		}
		if app, err := resource.ParseMemoryBankConfig("name", name); err != nil {
			invalid(t, "ParseMemoryBankConfig", name, err)
		} else if resource.MemoryBankConfigName(app) != name {
			t.Fatalf("ParseMemoryBankConfig(%q) = %q", name, app)
		}
	})
}

func TestParseNamesTheFieldAndTheForm(t *testing.T) {
	for _, c := range []struct {
		parse func() error
		msg   string
	}{
		{func() error { _, _, _, err := resource.ParseSession("session_source.session", ""); return err }, "session_source.session is required (apps/{app}/users/{user}/sessions/{session})"},
		{func() error { _, _, _, err := resource.ParseSession("name", "apps/a/users/u"); return err }, `name "apps/a/users/u" is not of the form apps/{app}/users/{user}/sessions/{session}`},
		{func() error { _, _, _, err := resource.ParseSession("name", "apps/a/users/u/sessions/s!"); return err }, `session id "s!" has the character '!'`},
		{func() error { _, _, err := resource.ParseUserOrAll("parent", "apps/a/sessions"); return err }, "not of the form apps/{app}/users/{user} or apps/{app}"},
		{func() error { _, _, err := resource.ParseState("name", "apps/a/users/u"); return err }, "apps/{app}/state or apps/{app}/users/{user}/state"},
		{func() error { _, _, err := resource.ParseState("name", "apps/a/users/u!/state"); return err }, `user id "u!"`},
		{func() error { _, err := resource.ParseApp("parent", "apps/a.b/"); return err }, "not of the form apps/{app}"},
		{func() error { _, _, err := resource.ParseMemory("name", "apps/a/memories/m.1"); return err }, `memory id "m.1" has the character '.'`},
	} {
		if err := c.parse(); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v, want INVALID_ARGUMENT with %q", err, c.msg)
		}
	}
}

func TestPatterns(t *testing.T) {
	p := resource.NewPattern("projects/{project}/locations/{location}/reasoningEngines/{engine}/sessions/{session}")
	name := p.Build("p1", "us-central1", "123", "s1")
	if name != "projects/p1/locations/us-central1/reasoningEngines/123/sessions/s1" {
		t.Fatalf("Build = %q", name)
	}
	if vars, ok := p.Match(name); !ok || strings.Join(vars, ",") != "p1,us-central1,123,s1" {
		t.Fatalf("Match(%q) = %v, %v", name, vars, ok)
	}
	for _, bad := range []string{"projects/p1/locations/us-central1/reasoningEngines/123/sessions/", "projects/p1/locations/l/reasoningEngines/123/sessions/s1/x", "projects/p1/regions/l/reasoningEngines/1/sessions/s"} {
		if _, ok := p.Match(bad); ok {
			t.Errorf("Match(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"apps//x", "apps/{a", "apps/x{a}", "apps/{}", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewPattern(%q) did not panic", bad)
				}
			}()
			resource.NewPattern(bad)
		}()
	}
}

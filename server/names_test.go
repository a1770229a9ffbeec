package server

import (
	"testing"

	"github.com/kioku-ai/kioku/fault"
)

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
		"apps/a",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if key, err := parseSessionKey("name", name); err != nil {
			if fault.KindOf(err) != fault.Invalid {
				t.Fatalf("parseSessionKey(%q): %v is not Invalid", name, err)
			}
		} else if key.Name() != name {
			t.Fatalf("parseSessionKey(%q) = %+v, whose name is %q", name, key, key.Name())
		}
		if app, user, err := parseSessionParent("parent", name, true); err != nil {
			if fault.KindOf(err) != fault.Invalid {
				t.Fatalf("parseSessionParent(%q): %v is not Invalid", name, err)
			}
		} else if got := "apps/" + app + "/users/" + user; user != "" && got != name {
			t.Fatalf("parseSessionParent(%q) = %q, %q", name, app, user)
		}
		if ref, err := parseStateRef("name", name); err == nil {
			want := appStateName(ref.App)
			if ref.User != "" {
				want = userStateName(ref.App, ref.User)
			}
			if want != name {
				t.Fatalf("parseStateRef(%q) = %+v", name, ref)
			}
		}
	})
}

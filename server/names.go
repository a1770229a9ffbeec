package server

import (
	"strings"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions"
)

// A pattern is a resource name template such as
// "apps/{app}/users/{user}/sessions/{session}": literal segments and
// variables, one per path segment.
type pattern []string

func parsePattern(s string) pattern { return strings.Split(s, "/") }

var (
	appPattern        = parsePattern("apps/{app}")
	userPattern       = parsePattern("apps/{app}/users/{user}")
	sessionPattern    = parsePattern("apps/{app}/users/{user}/sessions/{session}")
	appStatePattern   = parsePattern("apps/{app}/state")
	userStatePattern  = parsePattern("apps/{app}/users/{user}/state")
	memoryPattern     = parsePattern("apps/{app}/memories/{memory}")
	revisionPattern   = parsePattern("apps/{app}/memories/{memory}/revisions/{revision}")
	operationPattern  = parsePattern("apps/{app}/operations/{operation}")
	bankConfigPattern = parsePattern("apps/{app}/memoryBankConfig")
)

func (p pattern) String() string { return strings.Join(p, "/") }

// match returns the variables of name if it has the pattern's shape.
func (p pattern) match(name string) ([]string, bool) {
	segs := strings.Split(name, "/")
	if len(segs) != len(p) {
		return nil, false
	}
	var vars []string
	for i, seg := range segs {
		if strings.HasPrefix(p[i], "{") {
			if seg == "" {
				return nil, false
			}
			vars = append(vars, seg)
		} else if seg != p[i] {
			return nil, false
		}
	}
	return vars, true
}

// parseName matches name against p and returns its variables, or an Invalid
// error naming the field and the expected form.
func parseName(field, name string, p pattern) ([]string, error) {
	if name == "" {
		return nil, fault.Invalidf("%s is required (%s)", field, p)
	}
	vars, ok := p.match(name)
	if !ok {
		return nil, fault.Invalidf("%s %q is not of the form %s", field, truncate(name, 200), p)
	}
	return vars, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func parseApp(field, name string) (string, error) {
	v, err := parseName(field, name, appPattern)
	if err != nil {
		return "", err
	}
	return v[0], sessions.ValidateID("app id", v[0], sessions.AppIDChars)
}

func parseSessionKey(field, name string) (sessions.Key, error) {
	v, err := parseName(field, name, sessionPattern)
	if err != nil {
		return sessions.Key{}, err
	}
	k := sessions.Key{App: v[0], User: v[1], ID: v[2]}
	return k, sessions.ValidateKey(k)
}

// parseSessionParent parses "apps/{app}/users/{user}"; with allowAll also
// "apps/{app}" and "apps/{app}/users/-", which return an empty user.
func parseSessionParent(field, name string, allowAll bool) (app, user string, err error) {
	if allowAll {
		if v, ok := appPattern.match(name); ok {
			return v[0], "", sessions.ValidateID("app id", v[0], sessions.AppIDChars)
		}
		if v, ok := userPattern.match(name); ok && v[1] == "-" {
			return v[0], "", sessions.ValidateID("app id", v[0], sessions.AppIDChars)
		}
	}
	v, err := parseName(field, name, userPattern)
	if err != nil {
		if allowAll {
			return "", "", fault.Invalidf("%s %q is not of the form apps/{app}/users/{user} or apps/{app}", field, truncate(name, 200))
		}
		return "", "", err
	}
	if err := sessions.ValidateID("app id", v[0], sessions.AppIDChars); err != nil {
		return "", "", err
	}
	return v[0], v[1], sessions.ValidateID("user id", v[1], sessions.UserIDChars)
}

func parseStateRef(field, name string) (sessions.StateRef, error) {
	if v, ok := appStatePattern.match(name); ok {
		return sessions.StateRef{App: v[0]}, nil
	}
	if v, ok := userStatePattern.match(name); ok {
		return sessions.StateRef{App: v[0], User: v[1]}, nil
	}
	if name == "" {
		return sessions.StateRef{}, fault.Invalidf("%s is required (apps/{app}/state or apps/{app}/users/{user}/state)", field)
	}
	return sessions.StateRef{}, fault.Invalidf("%s %q is not of the form apps/{app}/state or apps/{app}/users/{user}/state", field, truncate(name, 200))
}

func eventName(k sessions.Key, id string) string { return k.Name() + "/events/" + id }

func appStateName(app string) string { return "apps/" + app + "/state" }

func userStateName(app, user string) string { return "apps/" + app + "/users/" + user + "/state" }

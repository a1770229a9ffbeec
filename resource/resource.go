// Package resource holds kioku's resource names (AIP-122): the patterns of
// kioku.v1's names, the functions that build them and the ones that parse
// them, and the rules of the ids in them.
//
// It is the one parser of names in kioku: the Go client builds the names
// it sends here, the server's handlers and its authorization policy parse
// the names they receive here, and the domain packages check ids with the
// same rules, so that a name means the same thing everywhere. The Vertex AI
// surface declares its own patterns with NewPattern.
//
// Build functions (SessionName, MemoryName, ...) do not check their ids:
// what they return parses when the ids are valid. Parse functions check
// the name's shape and every id in it, and return errors of kind
// fault.Invalid that name the request field and the expected form:
//
//	app, user, session, err := resource.ParseSession("name", name)
package resource

import (
	"fmt"
	"strings"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
)

// A Pattern is a resource name template such as
// "apps/{app}/users/{user}": literal segments and variables, one per path
// segment.
type Pattern struct {
	text string
	segs []string
}

// NewPattern returns the pattern of a template. It panics on a template
// with an empty segment or a variable that is not a whole segment, which is
// a programming error.
func NewPattern(template string) Pattern {
	segs := strings.Split(template, "/")
	for _, s := range segs {
		v := strings.HasPrefix(s, "{") || strings.HasSuffix(s, "}") || strings.ContainsAny(s, "{}")
		if s == "" || v && (len(s) < 3 || s[0] != '{' || s[len(s)-1] != '}' || strings.ContainsAny(s[1:len(s)-1], "{}")) {
			panic(fmt.Sprintf("resource: bad pattern %q", template))
		}
	}
	return Pattern{text: template, segs: segs}
}

// String returns the template.
func (p Pattern) String() string { return p.text }

// Match returns the variables of name, in order, if name has the pattern's
// shape: the same literal segments and a non-empty segment for each
// variable.
func (p Pattern) Match(name string) ([]string, bool) {
	if strings.Count(name, "/") != len(p.segs)-1 {
		return nil, false
	}
	var vars []string
	for i, seg := range strings.Split(name, "/") {
		if p.segs[i][0] == '{' {
			if seg == "" {
				return nil, false
			}
			vars = append(vars, seg)
		} else if seg != p.segs[i] {
			return nil, false
		}
	}
	return vars, true
}

// Parse is Match with an error of kind Invalid that names the field and
// the expected form.
func (p Pattern) Parse(field, name string) ([]string, error) {
	if name == "" {
		return nil, fault.Invalidf("%s is required (%s)", field, p)
	}
	vars, ok := p.Match(name)
	if !ok {
		return nil, fault.Invalidf("%s %q is not of the form %s", field, aip.Truncate(name, 200), p)
	}
	return vars, nil
}

// Build returns the name with the pattern's variables replaced by vars, in
// order. It panics when the count differs.
func (p Pattern) Build(vars ...string) string {
	var b strings.Builder
	i := 0
	for j, s := range p.segs {
		if j > 0 {
			b.WriteByte('/')
		}
		if s[0] == '{' {
			b.WriteString(vars[i])
			i++
		} else {
			b.WriteString(s)
		}
	}
	if i != len(vars) {
		panic(fmt.Sprintf("resource: %d values for pattern %s", len(vars), p))
	}
	return b.String()
}

// The patterns of kioku.v1's resource names.
var (
	App              = NewPattern("apps/{app}")
	User             = NewPattern("apps/{app}/users/{user}")
	Session          = NewPattern("apps/{app}/users/{user}/sessions/{session}")
	Event            = NewPattern("apps/{app}/users/{user}/sessions/{session}/events/{event}")
	AppState         = NewPattern("apps/{app}/state")
	UserState        = NewPattern("apps/{app}/users/{user}/state")
	Memory           = NewPattern("apps/{app}/memories/{memory}")
	Revision         = NewPattern("apps/{app}/memories/{memory}/revisions/{revision}")
	Operation        = NewPattern("apps/{app}/operations/{operation}")
	MemoryBankConfig = NewPattern("apps/{app}/memoryBankConfig")
	WebhookDelivery  = NewPattern("apps/{app}/webhookDeliveries/{delivery}")
	QuotaUsage       = NewPattern("apps/{app}/quotaUsage")
)

// Child returns the pattern of the resources under p's: p's template, a
// slash and template. It panics on a bad template, as NewPattern does.
func (p Pattern) Child(template string) Pattern { return NewPattern(p.text + "/" + template) }

// AllUsers is the user segment that stands for every user of an app in
// apps/{app}/users/-, the parent that lists every user's sessions (AIP-159).
const AllUsers = "-"

// AppName returns "apps/{app}", the parent of memories and operations.
func AppName(app string) string { return "apps/" + app }

// UserName returns "apps/{app}/users/{user}", the parent of a user's
// sessions.
func UserName(app, user string) string { return AppName(app) + "/users/" + user }

// SessionName returns "apps/{app}/users/{user}/sessions/{session}".
func SessionName(app, user, session string) string {
	return UserName(app, user) + "/sessions/" + session
}

// EventName returns the name of a session's event.
func EventName(app, user, session, event string) string {
	return SessionName(app, user, session) + "/events/" + event
}

// AppStateName returns "apps/{app}/state", the app's "app:" state.
func AppStateName(app string) string { return AppName(app) + "/state" }

// UserStateName returns "apps/{app}/users/{user}/state", a user's "user:"
// state.
func UserStateName(app, user string) string { return UserName(app, user) + "/state" }

// MemoryName returns "apps/{app}/memories/{memory}".
func MemoryName(app, memory string) string { return AppName(app) + "/memories/" + memory }

// RevisionName returns "apps/{app}/memories/{memory}/revisions/{revision}".
func RevisionName(app, memory, revision string) string {
	return MemoryName(app, memory) + "/revisions/" + revision
}

// OperationName returns "apps/{app}/operations/{operation}".
func OperationName(app, operation string) string {
	return AppName(app) + "/operations/" + operation
}

// MemoryBankConfigName returns "apps/{app}/memoryBankConfig".
func MemoryBankConfigName(app string) string { return AppName(app) + "/memoryBankConfig" }

// ParseApp parses "apps/{app}" and checks the app id.
func ParseApp(field, name string) (app string, err error) {
	v, err := App.Parse(field, name)
	if err != nil {
		return "", err
	}
	return v[0], ValidateID("app id", v[0], AppIDChars)
}

// ParseUser parses "apps/{app}/users/{user}" and checks the ids.
func ParseUser(field, name string) (app, user string, err error) {
	v, err := User.Parse(field, name)
	if err != nil {
		return "", "", err
	}
	return v[0], v[1], validateIDs(v, "app id", AppIDChars, "user id", UserIDChars)
}

// ParseUserOrAll parses the parent of a session listing:
// "apps/{app}/users/{user}", or "apps/{app}" and "apps/{app}/users/-" for
// every user of the app, which return an empty user.
func ParseUserOrAll(field, name string) (app, user string, err error) {
	if v, ok := App.Match(name); ok {
		return v[0], "", ValidateID("app id", v[0], AppIDChars)
	}
	if v, ok := User.Match(name); ok && v[1] == AllUsers {
		return v[0], "", ValidateID("app id", v[0], AppIDChars)
	}
	if _, ok := User.Match(name); !ok {
		if name == "" {
			return "", "", fault.Invalidf("%s is required (%s, or %s for every user)", field, User, App)
		}
		return "", "", fault.Invalidf("%s %q is not of the form %s or %s", field, aip.Truncate(name, 200), User, App)
	}
	return ParseUser(field, name)
}

// ParseSession parses "apps/{app}/users/{user}/sessions/{session}" and
// checks the ids.
func ParseSession(field, name string) (app, user, session string, err error) {
	v, err := Session.Parse(field, name)
	if err != nil {
		return "", "", "", err
	}
	return v[0], v[1], v[2], validateIDs(v, "app id", AppIDChars, "user id", UserIDChars, "session id", SessionIDChars)
}

// ParseState parses "apps/{app}/state" (user empty) or
// "apps/{app}/users/{user}/state" and checks the ids.
func ParseState(field, name string) (app, user string, err error) {
	if v, ok := AppState.Match(name); ok {
		return v[0], "", ValidateID("app id", v[0], AppIDChars)
	}
	if v, ok := UserState.Match(name); ok {
		return v[0], v[1], validateIDs(v, "app id", AppIDChars, "user id", UserIDChars)
	}
	if name == "" {
		return "", "", fault.Invalidf("%s is required (%s or %s)", field, AppState, UserState)
	}
	return "", "", fault.Invalidf("%s %q is not of the form %s or %s", field, aip.Truncate(name, 200), AppState, UserState)
}

// ParseMemory parses "apps/{app}/memories/{memory}" and checks the ids.
func ParseMemory(field, name string) (app, memory string, err error) {
	v, err := Memory.Parse(field, name)
	if err != nil {
		return "", "", err
	}
	return v[0], v[1], validateIDs(v, "app id", AppIDChars, "memory id", MemoryIDChars)
}

// ParseOperation parses "apps/{app}/operations/{operation}" and checks the
// ids.
func ParseOperation(field, name string) (app, operation string, err error) {
	v, err := Operation.Parse(field, name)
	if err != nil {
		return "", "", err
	}
	return v[0], v[1], validateIDs(v, "app id", AppIDChars, "operation id", OperationIDChars)
}

// QuotaUsageName returns "apps/{app}/quotaUsage".
func QuotaUsageName(app string) string { return AppName(app) + "/quotaUsage" }

// ParseQuotaUsage parses "apps/{app}/quotaUsage" and checks the app id.
func ParseQuotaUsage(field, name string) (app string, err error) {
	v, err := QuotaUsage.Parse(field, name)
	if err != nil {
		return "", err
	}
	return v[0], ValidateID("app id", v[0], AppIDChars)
}

// ParseMemoryBankConfig parses "apps/{app}/memoryBankConfig" and checks the
// app id.
func ParseMemoryBankConfig(field, name string) (app string, err error) {
	v, err := MemoryBankConfig.Parse(field, name)
	if err != nil {
		return "", err
	}
	return v[0], ValidateID("app id", v[0], AppIDChars)
}

// validateIDs checks vars[i] against the (field, extra) pairs of spec.
func validateIDs(vars []string, spec ...string) error {
	for i := range vars {
		if err := ValidateID(spec[2*i], vars[i], spec[2*i+1]); err != nil {
			return err
		}
	}
	return nil
}

package resource

import (
	"strconv"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
)

// The patterns of the core memory blocks' names (kioku.v1.BlockService):
// a user's blocks, the app's shared blocks, and each block's revisions.
var (
	UserBlock         = NewPattern("apps/{app}/users/{user}/blocks/{block}")
	AppBlock          = NewPattern("apps/{app}/blocks/{block}")
	UserBlockRevision = NewPattern("apps/{app}/users/{user}/blocks/{block}/revisions/{revision}")
	AppBlockRevision  = NewPattern("apps/{app}/blocks/{block}/revisions/{revision}")
)

// MaxBlockLabelBytes bounds a block's label.
const MaxBlockLabelBytes = 63

// BlockName returns "apps/{app}/users/{user}/blocks/{label}", or
// "apps/{app}/blocks/{label}" for an app's shared block (user empty).
func BlockName(app, user, label string) string {
	if user == "" {
		return AppName(app) + "/blocks/" + label
	}
	return UserName(app, user) + "/blocks/" + label
}

// BlockRevisionName returns "{block}/revisions/{n}".
func BlockRevisionName(app, user, label string, n int64) string {
	return BlockName(app, user, label) + "/revisions/" + strconv.FormatInt(n, 10)
}

// ValidateBlockLabel checks a block's label: a lower-case ASCII letter,
// then up to 62 lower-case ASCII letters, digits, '_' and '-'.
func ValidateBlockLabel(field, label string) error {
	if label == "" {
		return fault.InvalidField(field, "%s is required", field)
	}
	if len(label) > MaxBlockLabelBytes {
		return fault.InvalidField(field, "%s %q is %d bytes; the limit is %d", field, aip.Truncate(label, 200), len(label), MaxBlockLabelBytes)
	}
	for i, c := range label {
		if c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '-') {
			continue
		}
		if i == 0 {
			return fault.InvalidField(field, "%s %q starts with %s; it must start with a lower-case ASCII letter (a-z)", field, aip.Truncate(label, 200), describe(label, i, c))
		}
		return fault.InvalidField(field, "%s %q has %s at byte %d; allowed are lower-case ASCII letters, digits, '_' and '-'", field, aip.Truncate(label, 200), describe(label, i, c), i)
	}
	return nil
}

// ParseBlock parses a block's name, "apps/{app}/users/{user}/blocks/{label}"
// or "apps/{app}/blocks/{label}" (user empty), and checks the ids and the
// label.
func ParseBlock(field, name string) (app, user, label string, err error) {
	if v, ok := AppBlock.Match(name); ok {
		return v[0], "", v[1], blockIDs(field, v[0], "", v[1])
	}
	if v, ok := UserBlock.Match(name); ok {
		return v[0], v[1], v[2], blockIDs(field, v[0], v[1], v[2])
	}
	if name == "" {
		return "", "", "", fault.InvalidField(field, "%s is required (%s or %s)", field, UserBlock, AppBlock)
	}
	return "", "", "", fault.InvalidField(field, "%s %q is not of the form %s or %s", field, aip.Truncate(name, 200), UserBlock, AppBlock)
}

// ParseBlocksParent parses the parent of a block listing:
// "apps/{app}/users/{user}" for a user's blocks, "apps/{app}" for the
// app's shared ones (user empty).
func ParseBlocksParent(field, name string) (app, user string, err error) {
	if v, ok := App.Match(name); ok {
		return v[0], "", ValidateID("app id", v[0], AppIDChars)
	}
	if _, ok := User.Match(name); ok {
		return ParseUser(field, name)
	}
	if name == "" {
		return "", "", fault.InvalidField(field, "%s is required (%s or %s)", field, User, App)
	}
	return "", "", fault.InvalidField(field, "%s %q is not of the form %s or %s", field, aip.Truncate(name, 200), User, App)
}

// blockIDs checks a block name's app and user ids (user empty for the
// app's) and its label.
func blockIDs(field, app, user, label string) error {
	if err := ValidateID("app id", app, AppIDChars); err != nil {
		return err
	}
	if user != "" {
		if err := ValidateID("user id", user, UserIDChars); err != nil {
			return err
		}
	}
	return ValidateBlockLabel(field+" label", label)
}

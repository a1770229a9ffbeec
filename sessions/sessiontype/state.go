package sessiontype

import (
	"maps"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/resource"
)

// The state key prefixes that choose a key's scope.
const (
	PrefixApp  = "app:"
	PrefixUser = "user:"
	PrefixTemp = "temp:"
)

// Scope is where a state key lives.
type Scope int

// The scopes, chosen by a key's prefix.
const (
	ScopeSession Scope = iota // no prefix
	ScopeUser                 // "user:"
	ScopeApp                  // "app:"
	ScopeTemp                 // "temp:", never stored
)

// ScopeOf returns the scope of a state key.
func ScopeOf(key string) Scope {
	switch {
	case strings.HasPrefix(key, PrefixApp):
		return ScopeApp
	case strings.HasPrefix(key, PrefixUser):
		return ScopeUser
	case strings.HasPrefix(key, PrefixTemp):
		return ScopeTemp
	}
	return ScopeSession
}

// Deltas is a state delta split by scope. Temp keys are dropped. Keys keep
// their prefixes; a nil value deletes the key.
type Deltas struct {
	Session map[string]any
	User    map[string]any
	App     map[string]any
}

// Empty reports whether no scope changes.
func (d Deltas) Empty() bool {
	return len(d.Session) == 0 && len(d.User) == 0 && len(d.App) == 0
}

// SplitDelta splits a delta by scope, dropping "temp:" keys.
func SplitDelta(delta map[string]any) Deltas {
	var d Deltas
	for k, v := range delta {
		var m *map[string]any
		switch ScopeOf(k) {
		case ScopeSession:
			m = &d.Session
		case ScopeUser:
			m = &d.User
		case ScopeApp:
			m = &d.App
		default:
			continue
		}
		if *m == nil {
			*m = make(map[string]any)
		}
		(*m)[k] = v
	}
	return d
}

// StripTemp returns delta without its "temp:" keys; delta itself when it has
// none.
func StripTemp(delta map[string]any) map[string]any {
	n := 0
	for k := range delta {
		if ScopeOf(k) == ScopeTemp {
			n++
		}
	}
	if n == 0 {
		return delta
	}
	out := make(map[string]any, len(delta)-n)
	for k, v := range delta {
		if ScopeOf(k) != ScopeTemp {
			out[k] = v
		}
	}
	return out
}

// ApplyDelta returns state with delta applied: each value replaces the old
// one whole, and a nil value deletes the key. state is not modified.
func ApplyDelta(state, delta map[string]any) map[string]any {
	out := make(map[string]any, len(state)+len(delta))
	maps.Copy(out, state)
	for k, v := range delta {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// Merge returns the merged view of the three scopes.
func Merge(session, user, app map[string]any) map[string]any {
	out := make(map[string]any, len(session)+len(user)+len(app))
	maps.Copy(out, session)
	maps.Copy(out, user)
	maps.Copy(out, app)
	return out
}

// SharedState is a "user:" or "app:" scope's state.
type SharedState struct {
	Ref        StateRef
	State      map[string]any
	UpdateTime time.Time
}

// StateRef names a shared scope: the app's ("app:") when User is empty, the
// user's ("user:") otherwise.
type StateRef struct {
	App  string
	User string
}

// Name returns the scope's resource name: "apps/{app}/state" or
// "apps/{app}/users/{user}/state".
func (r StateRef) Name() string {
	if r.User == "" {
		return resource.AppStateName(r.App)
	}
	return resource.UserStateName(r.App, r.User)
}

// Prefix returns the key prefix of the scope.
func (r StateRef) Prefix() string {
	if r.User == "" {
		return PrefixApp
	}
	return PrefixUser
}

package auth

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// named is a resource a request names, with the field that names it.
type named struct {
	field string
	res   Resource
	kind  *Kind // nil for a scope
}

func denied(format string, a ...any) error {
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(format, a...))
}

// Authorize decides whether a caller may make a request of a procedure
// (the Guard's interceptor calls it; see the package documentation for
// the rules). It reports whether the handler must check a loaded
// resource's user with CheckLoaded before it acts. A procedure without a
// rule is refused.
func (p Policy) Authorize(c Caller, procedure string, req proto.Message) (afterLoad bool, err error) {
	rule, ok := p[procedure]
	if !ok {
		return false, denied("%s has no authorization rule", procedure)
	}
	return authorize(c, rule, req.ProtoReflect())
}

// authorize decides whether a caller may make a request under a rule.
func authorize(c Caller, rule Rule, m protoreflect.Message) (afterLoad bool, err error) {
	var resources []named
	for _, f := range rule.Resources {
		v, set := valueAt(m, f.Path)
		if f.Scope {
			if !set || v.Map().Len() == 0 {
				continue
			}
			r := Resource{Owner: AppWide}
			if u := v.Map().Get(protoreflect.ValueOfString("user_id").MapKey()); u.IsValid() && u.String() != "" {
				r = Resource{Owner: UserOwned, User: u.String()}
			}
			resources = append(resources, named{field: f.Path, res: r})
			continue
		}
		name := ""
		if set {
			name = v.String()
		}
		if name == "" {
			if f.Optional {
				continue
			}
			return false, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is required (%s)", f.Path, f.Kind.Form))
		}
		r, ok := f.Kind.Parse(name)
		if !ok {
			return false, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s %q is not of the form %s", f.Path, aip.Truncate(name, 200), f.Kind.Form))
		}
		resources = append(resources, named{field: f.Path, res: r, kind: f.Kind})
	}
	if c.App == AllApps {
		return false, nil
	}
	for _, n := range resources {
		if n.kind != nil && n.res.App != c.App {
			return false, denied("%s names app %q; this API key may reach app %q only", n.field, n.res.App, c.App)
		}
	}
	if c.User == "" {
		return false, nil
	}
	if rule.Access == AppAdmin {
		return false, denied("this call reaches settings of the whole app %q or erases a user; it needs an app key, and this API key may reach user %q only", c.App, c.User)
	}
	if err := checkStateDeltas(c, rule, m); err != nil {
		return false, err
	}
	pinned, hasScope := false, false
	for _, n := range resources {
		hasScope = hasScope || n.kind == nil
		switch n.res.Owner {
		case UserOwned:
			if n.res.User != c.User {
				if n.kind == nil {
					return false, denied("%s has user_id %q; this API key may reach user %q only", n.field, n.res.User, c.User)
				}
				return false, denied("%s names user %q; this API key may reach user %q only", n.field, n.res.User, c.User)
			}
			pinned = true
		case OwnerAfterLoad:
			afterLoad, pinned = true, true
		case AppWide:
			switch {
			case n.kind == nil:
				return false, denied("%s has no user_id; this API key may reach scope {\"user_id\": %q} only", n.field, c.User)
			case !n.kind.SharedRead:
				return false, denied("%s reaches every user of app %q; this API key may reach user %q only", n.field, c.App, c.User)
			case rule.Access != Read:
				return false, denied("%s belongs to the whole app %q: a user key may read it, not change it", n.field, c.App)
			}
			pinned = true
		}
	}
	if !pinned {
		if hasScope || hasScopeField(rule) {
			return false, denied("give scope {\"user_id\": %q}: this API key may reach user %q only", c.User, c.User)
		}
		return false, denied("this call names no resource of user %q, the only user this API key may reach", c.User)
	}
	return afterLoad, nil
}

func hasScopeField(rule Rule) bool {
	for _, f := range rule.Resources {
		if f.Scope {
			return true
		}
	}
	return false
}

// checkStateDeltas applies StateScopeAllowed to every key of the rule's
// state-delta fields.
func checkStateDeltas(c Caller, rule Rule, m protoreflect.Message) error {
	for _, path := range rule.StateDeltas {
		v, set := valueAt(m, path)
		if !set {
			continue
		}
		fields := v.Message().Descriptor().Fields().ByName("fields")
		var err error
		v.Message().Get(fields).Map().Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			err = StateScopeAllowed(c, path, k.String())
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// StateScopeAllowed is the rule of which state a caller may write, by the
// scope a key's prefix chooses (package sessions): an app key may write
// every scope; a user key may write a session's own keys and the "user:"
// and "temp:" scopes, but not "app:", which every user of the app reads.
// field names the request field the key is in, for the message. The
// interceptor applies it to the fields a Rule lists in StateDeltas before
// the handler runs, so a refused request stores nothing.
func StateScopeAllowed(c Caller, field, key string) error {
	if c.User == "" || sessiontype.ScopeOf(key) != sessiontype.ScopeApp {
		return nil
	}
	return denied("%s key %q writes the app scope (%q), which every user of app %q reads; this API key may write a session's own keys and the %q and %q scopes of user %q only",
		field, aip.Truncate(key, 100), sessiontype.PrefixApp, c.App, sessiontype.PrefixUser, sessiontype.PrefixTemp, c.User)
}

// loadCheck records whether a call's handler must check a loaded
// resource, and whether it did.
type loadCheck struct{ needed, done atomic.Bool }

type loadCheckKey struct{}

// CheckLoaded is the check of a resource whose user the request's name
// does not tell (Owner OwnerAfterLoad: a memory or an operation named by
// id, a Vertex session): the handler loads the resource, finds the user it
// belongs to ("" for the whole app) and calls CheckLoaded before it acts
// on it or returns it. CheckLoaded returns nil when the caller may reach a
// resource of that user in the app the request named (the interceptor has
// checked the app), and absent otherwise, so that another user's resource
// answers exactly as one that does not exist. A handler that returns
// success without calling it, for a caller it concerns, fails with
// INTERNAL instead (fail closed).
func CheckLoaded(ctx context.Context, user string, absent error) error {
	if lc, ok := ctx.Value(loadCheckKey{}).(*loadCheck); ok {
		lc.done.Store(true)
	}
	c, ok := CallerFrom(ctx)
	if !ok || c.User == "" || c.User == user {
		return nil
	}
	return absent
}

// LoadCheckNeeded reports whether the call's handler must call
// CheckLoaded: its caller is confined to a user and the request names a
// resource of Owner OwnerAfterLoad. A handler may skip loading the resource
// for the check when it is not.
func LoadCheckNeeded(ctx context.Context) bool {
	lc, ok := ctx.Value(loadCheckKey{}).(*loadCheck)
	return ok && lc.needed.Load()
}

// errUnchecked is the error of a handler that did not call CheckLoaded.
var errUnchecked = errors.New("internal error: the handler did not check whose resource it loaded; nothing was returned")

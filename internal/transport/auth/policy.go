package auth

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Access is what a procedure does with the resources it names.
type Access int

// The kinds of access.
const (
	// Read reads resources.
	Read Access = iota + 1
	// Write creates, changes or deletes resources.
	Write
	// AppAdmin reads or changes settings of a whole app (the memory
	// bank's configuration) or erases a user of it (DeleteUser): app keys
	// only.
	AppAdmin
)

func (a Access) String() string {
	switch a {
	case Read:
		return "read"
	case Write:
		return "write"
	case AppAdmin:
		return "app-admin"
	}
	return fmt.Sprintf("access(%d)", int(a))
}

// Owner says whom a named resource belongs to, as far as its name tells.
type Owner int

// The owners a resource name can tell.
const (
	// AppWide: the resource belongs to the whole app (the app's state,
	// every user's sessions, the app's operations). A user key may only
	// read it, and only when its kind is SharedRead.
	AppWide Owner = iota + 1
	// UserOwned: the resource belongs to Resource.User.
	UserOwned
	// OwnerAfterLoad: the name does not tell the user (a memory or an
	// operation named by id, a Vertex session); the handler tells it with
	// CheckLoaded once it has loaded the resource.
	OwnerAfterLoad
	// ScopedContainer: the name gives only the app, as the home of
	// resources the request selects by a scope field (memories by scope).
	// It is checked for its app; the scope decides the user.
	ScopedContainer
)

// Resource is what authorization needs to know of a named resource.
type Resource struct {
	App   string
	User  string // set when Owner is UserOwned
	Owner Owner
}

// A Kind is a kind of resource name a request field may hold.
type Kind struct {
	// Form is the expected form (or forms), for messages:
	// "apps/{app}/users/{user}/sessions/{session}".
	Form string
	// Parse returns the resource a name denotes, false when the name is
	// not of this kind.
	Parse func(name string) (Resource, bool)
	// SharedRead marks kinds whose app-wide resources every user of the
	// app may read: the app's state (not the memory bank's configuration,
	// whose prompts and schemas are the app's: it is AppAdmin).
	SharedRead bool
}

// Field declares one field of a request that authorization reads.
type Field struct {
	// Path is the field's path in the request message, its proto field
	// names joined with dots: "name", "session_source.session".
	Path string
	// Kind, for a string field, is the kind of resource name it holds.
	Kind *Kind
	// Scope marks a map<string, string> field holding a memory scope
	// instead: the resources it selects belong to its "user_id" entry (to
	// the whole app when it has none).
	Scope bool
	// Optional fields may be absent. An empty required name field is
	// INVALID_ARGUMENT; an absent scope reaches nobody.
	Optional bool
}

// Rule declares what one procedure needs: its access, the request fields
// that name resources (every one of them: fields not listed here are never
// read as names), and the fields that carry state deltas, whose keys the
// caller must be allowed to write (StateScopeAllowed).
type Rule struct {
	Access      Access
	Resources   []Field
	StateDeltas []string
}

// Policy is the rules of an API surface, by full procedure name
// ("/kioku.v1.SessionService/CreateSession").
type Policy map[string]Rule

// Check verifies a policy against the services it serves: every method of
// every service has a rule, every rule is for one of their methods, and
// every declared path exists with the right type (a string for a name, a
// map<string, string> for a scope, a google.protobuf.Struct for a state
// delta). Server constructors call it, so a new RPC without a declaration
// fails every test that starts a server.
func (p Policy) Check(services ...protoreflect.ServiceDescriptor) error {
	var errs []error
	known := map[string]bool{}
	for _, svc := range services {
		methods := svc.Methods()
		for i := range methods.Len() {
			m := methods.Get(i)
			proc := "/" + string(svc.FullName()) + "/" + string(m.Name())
			known[proc] = true
			rule, ok := p[proc]
			if !ok {
				errs = append(errs, fmt.Errorf("%s has no authorization rule: declare its access and resource fields", proc))
				continue
			}
			if err := rule.check(m.Input()); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", proc, err))
			}
		}
	}
	for _, proc := range slices.Sorted(maps.Keys(p)) {
		if !known[proc] {
			errs = append(errs, fmt.Errorf("rule for %s, which no served service has", proc))
		}
	}
	return errors.Join(errs...)
}

func (r Rule) check(req protoreflect.MessageDescriptor) error {
	if r.Access < Read || r.Access > AppAdmin {
		return fmt.Errorf("no access declared")
	}
	for _, f := range r.Resources {
		fd, err := fieldAt(req, f.Path)
		if err != nil {
			return err
		}
		switch {
		case f.Scope == (f.Kind != nil):
			return fmt.Errorf("field %s must have either a Kind or Scope", f.Path)
		case f.Kind != nil && (fd.Kind() != protoreflect.StringKind || fd.IsList()):
			return fmt.Errorf("field %s is not a string; a resource name must be", f.Path)
		case f.Scope && !(fd.IsMap() && fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.StringKind):
			return fmt.Errorf("field %s is not a map<string, string>; a scope must be", f.Path)
		}
	}
	for _, path := range r.StateDeltas {
		fd, err := fieldAt(req, path)
		if err != nil {
			return err
		}
		if fd.Message() == nil || fd.Message().FullName() != "google.protobuf.Struct" || fd.IsList() {
			return fmt.Errorf("state delta field %s is not a google.protobuf.Struct", path)
		}
	}
	return nil
}

// fieldAt finds the field at a dotted path, through singular message
// fields.
func fieldAt(m protoreflect.MessageDescriptor, path string) (protoreflect.FieldDescriptor, error) {
	parts := strings.Split(path, ".")
	for i, name := range parts {
		fd := m.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return nil, fmt.Errorf("%s has no field %s (path %s)", m.FullName(), name, path)
		}
		if i == len(parts)-1 {
			return fd, nil
		}
		if fd.Message() == nil || fd.IsList() || fd.IsMap() {
			return nil, fmt.Errorf("path %s goes through %s, which is not a singular message", path, name)
		}
		m = fd.Message()
	}
	return nil, fmt.Errorf("empty path")
}

// valueAt returns the value at a dotted path of a message, and whether it
// is set (every message on the way set, the field itself set).
func valueAt(m protoreflect.Message, path string) (protoreflect.Value, bool) {
	parts := strings.Split(path, ".")
	for i, name := range parts {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		if fd == nil || !m.Has(fd) {
			return protoreflect.Value{}, false
		}
		if i == len(parts)-1 {
			return m.Get(fd), true
		}
		m = m.Get(fd).Message()
	}
	return protoreflect.Value{}, false
}

package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/aip"
)

// Keys are the API keys a server accepts. Callers send a key as
// `Authorization: Bearer KEY`; the server keeps only the keys' SHA-256
// digests. Health and reflection need no key.
//
// A key is confined to one app (or, for operators, "*": every app), and
// may be confined further to one user of its app. Before a handler runs,
// every resource name the request carries, at any depth (the `name`,
// `parent` and `session` fields: a session source, a memory source, a
// fork's target), must be under the key's app, and under
// apps/{app}/users/{user} where it names a user; every `scope` must have the
// key's user as its user_id. A user key may call only what a user's own
// agent needs: the session methods on its own sessions and user state (and
// read the app state), the memory methods within its own scope (a request
// that lists, retrieves, creates or purges must give that scope), memories
// and operations by name when they are in its scope (others are NOT_FOUND,
// as if absent), and reading the memory bank's configuration. It may not
// list all sessions or operations of the app, change app state or the
// configuration.
//
// A key may have an expiry time, after which it is refused as expired.
// Keys can be replaced while the server runs (Reload). A call is checked
// against the keys in force, and their expiry, when it arrives; a stream
// opened before then runs to its end.
type Keys struct {
	path     string
	byDigest atomic.Pointer[map[[sha256.Size]byte]loadedKey]
}

// loadedKey is a key-file entry with its expiry parsed.
type loadedKey struct {
	Key
	expires time.Time // zero: never
}

// Key is one entry of a key file.
type Key struct {
	// Name says whose key it is, for logs.
	Name string `json:"name"`
	// App is the app the key may reach, or "*" for every app.
	App string `json:"app"`
	// User, when set, confines the key to this user of App.
	User string `json:"user,omitempty"`
	// SHA256 is the hex SHA-256 digest of the key.
	SHA256 string `json:"sha256"`
	// ExpireTime, when set, is when the key stops working (RFC 3339).
	ExpireTime string `json:"expire_time,omitempty"`
}

// AllApps is the App of a key that may reach every app.
const AllApps = "*"

// LoadKeys reads a key file: {"keys": [{"name", "app", "user", "sha256",
// "expire_time"}]}, user and expire_time being optional.
func LoadKeys(path string) (*Keys, error) {
	m, err := readKeys(path)
	if err != nil {
		return nil, err
	}
	k := &Keys{path: path}
	k.byDigest.Store(&m)
	return k, nil
}

// Reload reads the key file again and, if it is valid, puts its keys in
// force at once: new keys work and removed ones stop working for every
// later call. If it is not valid the keys in force stay, and the error says
// why. It returns the number of keys now in force.
func (k *Keys) Reload() (int, error) {
	m, err := readKeys(k.path)
	if err != nil {
		if old := k.byDigest.Load(); old != nil {
			return len(*old), err
		}
		return 0, err
	}
	k.byDigest.Store(&m)
	return len(m), nil
}

// readKeys reads and checks a key file.
func readKeys(path string) (map[[sha256.Size]byte]loadedKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the key file: %w", err)
	}
	var f struct {
		Keys []Key `json:"keys"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("key file %s: %w (want {\"keys\": [{\"name\", \"app\", \"sha256\"}]})", path, err)
	}
	k := map[[sha256.Size]byte]loadedKey{}
	for i, key := range f.Keys {
		d, err := hex.DecodeString(key.SHA256)
		if err != nil || len(d) != sha256.Size {
			return nil, fmt.Errorf("key file %s: keys[%d].sha256 must be 64 hex digits (the SHA-256 of the key; kioku key prints it)", path, i)
		}
		if key.App != AllApps {
			if err := aip.ValidateID(fmt.Sprintf("keys[%d].app", i), key.App, aip.AppIDChars); err != nil {
				return nil, fmt.Errorf("key file %s: %v (or \"*\" for every app)", path, err)
			}
		}
		if key.User != "" {
			if key.App == AllApps {
				return nil, fmt.Errorf("key file %s: keys[%d] has a user but app \"*\"; a user key needs its app", path, i)
			}
			if err := aip.ValidateID(fmt.Sprintf("keys[%d].user", i), key.User, aip.UserIDChars); err != nil {
				return nil, fmt.Errorf("key file %s: %v", path, err)
			}
		}
		var expires time.Time
		if key.ExpireTime != "" {
			if expires, err = time.Parse(time.RFC3339, key.ExpireTime); err != nil {
				return nil, fmt.Errorf("key file %s: keys[%d].expire_time %q is not an RFC 3339 time (like 2027-01-31T00:00:00Z)", path, i, key.ExpireTime)
			}
		}
		var digest [sha256.Size]byte
		copy(digest[:], d)
		if _, dup := k[digest]; dup {
			return nil, fmt.Errorf("key file %s: keys[%d] repeats the digest of an earlier key", path, i)
		}
		k[digest] = loadedKey{Key: key, expires: expires}
	}
	if len(k) == 0 {
		return nil, fmt.Errorf("key file %s has no keys", path)
	}
	return k, nil
}

// NewKey returns a new random key and its key-file entry; user may be
// empty.
func NewKey(name, app, user string) (string, Key) {
	var b [32]byte
	rand.Read(b[:])
	key := "kioku_" + base64.RawURLEncoding.EncodeToString(b[:])
	d := sha256.Sum256([]byte(key))
	return key, Key{Name: name, App: app, User: user, SHA256: hex.EncodeToString(d[:])}
}

// lookup returns the entry of a presented key.
func (k *Keys) lookup(key string) (loadedKey, bool) {
	m := k.byDigest.Load()
	if m == nil { // a zero Keys holds no key: every call is refused
		return loadedKey{}, false
	}
	e, ok := (*m)[sha256.Sum256([]byte(key))]
	return e, ok
}

// authInterceptor admits calls that carry a known key and name only
// resources of the key's app.
type authInterceptor struct {
	keys *Keys
}

func (a *authInterceptor) authenticate(h interface{ Get(string) string }) (Key, error) {
	token, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return Key{}, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("this server needs an API key: send the header Authorization: Bearer KEY"))
	}
	key, ok := a.keys.lookup(strings.TrimSpace(token))
	if !ok {
		return Key{}, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("unknown API key"))
	}
	if !key.expires.IsZero() && !time.Now().Before(key.expires) {
		return Key{}, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("this API key expired at %s; ask for a new one", key.ExpireTime))
	}
	return key.Key, nil
}

func (a *authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		key, err := a.authenticate(req.Header())
		if err != nil {
			return nil, err
		}
		if m, ok := req.Any().(proto.Message); ok {
			if err := admit(key, req.Spec().Procedure, m.ProtoReflect()); err != nil {
				return nil, err
			}
		}
		return next(context.WithValue(ctx, keyContext{}, key), req)
	}
}

func (a *authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a *authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		key, err := a.authenticate(conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(context.WithValue(ctx, keyContext{}, key), &confinedConn{StreamingHandlerConn: conn, key: key})
	}
}

// confinedConn checks every message a stream receives.
type confinedConn struct {
	connect.StreamingHandlerConn
	key Key
}

func (c *confinedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if m, ok := msg.(proto.Message); ok {
		return admit(c.key, c.Spec().Procedure, m.ProtoReflect())
	}
	return nil
}

// keyContext carries the caller's key in a handler's context.
type keyContext struct{}

// confinedUser returns the user a call's key is confined to, or "".
func confinedUser(ctx context.Context) string {
	k, _ := ctx.Value(keyContext{}).(Key)
	return k.User
}

// userRule is what a user key must also meet to call a procedure.
type userRule int

const (
	// ownNames: every name is under the key's user (session methods).
	ownNames userRule = iota + 1
	// ownNamesOrAppState: as ownNames, or the app state (GetState).
	ownNamesOrAppState
	// scoped: the request gives a scope (checked to be the user's).
	scoped
	// checkedByHandler: names an app-level resource (a memory, an
	// operation) that the handler checks is in the user's scope, or reads
	// what every user may read; the generic checks suffice otherwise.
	checkedByHandler
)

// userRules are the procedures open to user keys; any other is closed.
var userRules = map[string]userRule{
	kiokuv1connect.SessionServiceCreateSessionProcedure:          ownNames,
	kiokuv1connect.SessionServiceGetSessionProcedure:             ownNames,
	kiokuv1connect.SessionServiceListSessionsProcedure:           ownNames,
	kiokuv1connect.SessionServiceUpdateSessionProcedure:          ownNames,
	kiokuv1connect.SessionServiceDeleteSessionProcedure:          ownNames,
	kiokuv1connect.SessionServiceAppendEventProcedure:            ownNames,
	kiokuv1connect.SessionServiceListEventsProcedure:             ownNames,
	kiokuv1connect.SessionServiceForkSessionProcedure:            ownNames,
	kiokuv1connect.SessionServiceWatchSessionProcedure:           ownNames,
	kiokuv1connect.SessionServiceSearchEventsProcedure:           ownNames,
	kiokuv1connect.SessionServiceUpdateStateProcedure:            ownNames,
	kiokuv1connect.SessionServiceGetStateProcedure:               ownNamesOrAppState,
	kiokuv1connect.MemoryBankServiceCreateMemoryProcedure:        scoped,
	kiokuv1connect.MemoryBankServiceListMemoriesProcedure:        scoped,
	kiokuv1connect.MemoryBankServiceRetrieveMemoriesProcedure:    scoped,
	kiokuv1connect.MemoryBankServicePurgeMemoriesProcedure:       scoped,
	kiokuv1connect.MemoryBankServiceGenerateMemoriesProcedure:    checkedByHandler, // scope or a session of the user
	kiokuv1connect.MemoryBankServiceGetMemoryProcedure:           checkedByHandler,
	kiokuv1connect.MemoryBankServiceUpdateMemoryProcedure:        checkedByHandler,
	kiokuv1connect.MemoryBankServiceDeleteMemoryProcedure:        checkedByHandler,
	kiokuv1connect.MemoryBankServiceRollbackMemoryProcedure:      checkedByHandler,
	kiokuv1connect.MemoryBankServiceListMemoryRevisionsProcedure: checkedByHandler,
	kiokuv1connect.MemoryBankServiceGetMemoryBankConfigProcedure: checkedByHandler,
	kiokuv1connect.OperationServiceGetOperationProcedure:         checkedByHandler,
	kiokuv1connect.OperationServiceWaitOperationProcedure:        checkedByHandler,
	kiokuv1connect.OperationServiceCancelOperationProcedure:      checkedByHandler,
}

// admit checks a request against a key: its names and scopes (confine),
// then, for a user key, the procedure's rule.
func admit(key Key, procedure string, m protoreflect.Message) error {
	if err := confine(key, m); err != nil {
		return err
	}
	if key.User == "" {
		return nil
	}
	denied := func(format string, a ...any) error {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(format, a...))
	}
	rule, ok := userRules[procedure]
	if !ok {
		return denied("%s is not open to a key confined to one user", procedure)
	}
	switch rule {
	case ownNames, ownNamesOrAppState:
		var err error
		userPrefix := "apps/" + key.App + "/users/" + key.User
		walkNames(m, func(field protoreflect.Name, name string) bool {
			own := name == userPrefix || strings.HasPrefix(name, userPrefix+"/")
			if !own && !(rule == ownNamesOrAppState && name == "apps/"+key.App+"/state") {
				err = denied("%s %q is not under %s; this API key may reach user %q only", field, name, userPrefix, key.User)
			}
			return err == nil
		})
		return err
	case scoped:
		if !hasScope(m) {
			return denied("give scope {\"user_id\": %q}: this API key may reach user %q only", key.User, key.User)
		}
	}
	return nil
}

// nameFields are the fields that hold resource names.
var nameFields = map[protoreflect.Name]bool{"name": true, "parent": true, "session": true}

// walkFields calls fn with every set field of a message and, through
// singular, repeated and map-valued messages, of the messages within it,
// until fn returns false.
func walkFields(m protoreflect.Message, fn func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool) bool {
	more := true
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if more = fn(fd, v); !more {
			return false
		}
		switch {
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					more = walkFields(mv.Message(), fn)
					return more
				})
			}
		case fd.IsList():
			if fd.Kind() == protoreflect.MessageKind {
				for i := 0; i < v.List().Len() && more; i++ {
					more = walkFields(v.List().Get(i).Message(), fn)
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			more = walkFields(v.Message(), fn)
		}
		return more
	})
	return more
}

// walkNames calls fn with every resource-name field, at any depth, until fn
// returns false.
func walkNames(m protoreflect.Message, fn func(field protoreflect.Name, name string) bool) bool {
	return walkFields(m, func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() == protoreflect.StringKind && !fd.IsList() && !fd.IsMap() && nameFields[fd.Name()] {
			return fn(fd.Name(), v.String())
		}
		return true
	})
}

// walkScopes calls fn with every set scope map, at any depth, until fn
// returns false.
func walkScopes(m protoreflect.Message, fn func(scope protoreflect.Map) bool) bool {
	return walkFields(m, func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.IsMap() && fd.Name() == "scope" && fd.MapValue().Kind() == protoreflect.StringKind {
			return fn(v.Map())
		}
		return true
	})
}

func hasScope(m protoreflect.Message) bool {
	return !walkScopes(m, func(protoreflect.Map) bool { return false })
}

// confine checks a message's resource names against a key's app and, for
// a user key, that names of users name its user and scopes its user.
func confine(key Key, m protoreflect.Message) error {
	if key.App == AllApps {
		return nil
	}
	var err error
	walkNames(m, func(field protoreflect.Name, name string) bool {
		app, user, ok := appOf(name)
		switch {
		case !ok:
		case app != key.App:
			err = connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s names app %q; this API key may reach app %q only", field, app, key.App))
		case key.User != "" && user != "" && user != key.User:
			err = connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s names user %q; this API key may reach user %q only", field, user, key.User))
		}
		return err == nil
	})
	if err != nil || key.User == "" {
		return err
	}
	walkScopes(m, func(scope protoreflect.Map) bool {
		if got := scope.Get(protoreflect.ValueOfString("user_id").MapKey()); !got.IsValid() || got.String() != key.User {
			err = connect.NewError(connect.CodePermissionDenied, fmt.Errorf("scope must have user_id %q: this API key may reach user %q only", key.User, key.User))
		}
		return err == nil
	})
	return err
}

// appOf returns the app of a resource name apps/{app}/..., and its user
// when it is apps/{app}/users/{user}/...
func appOf(name string) (app, user string, ok bool) {
	rest, ok := strings.CutPrefix(name, "apps/")
	if !ok {
		return "", "", false
	}
	app, rest, _ = strings.Cut(rest, "/")
	if rest, ok := strings.CutPrefix(rest, "users/"); ok {
		user, _, _ = strings.Cut(rest, "/")
	}
	return app, user, true
}

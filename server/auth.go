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

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/kioku-ai/kioku/sessions"
)

// Keys are the API keys a server accepts, each confined to one app (or, for
// operators, to every app). Callers send a key as `Authorization: Bearer
// KEY`. The server keeps only the keys' SHA-256 digests.
//
// A key's confinement is checked on every request before its handler runs:
// each resource name the request carries, at any depth (`name`, `parent`,
// `session` fields: a session source, a memory source, a fork's target),
// must be under `apps/{the key's app}`. Health and reflection need no key.
// User-scoped keys (confined to one user of an app) are not supported yet.
type Keys struct {
	byDigest map[[sha256.Size]byte]Key
}

// Key is one entry of a key file.
type Key struct {
	// Name says whose key it is, for logs.
	Name string `json:"name"`
	// App is the app the key may reach, or "*" for every app.
	App string `json:"app"`
	// SHA256 is the hex SHA-256 digest of the key.
	SHA256 string `json:"sha256"`
}

// AllApps is the App of a key that may reach every app.
const AllApps = "*"

// LoadKeys reads a key file: {"keys": [{"name": ..., "app": ..., "sha256": ...}]}.
func LoadKeys(path string) (*Keys, error) {
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
	k := &Keys{byDigest: map[[sha256.Size]byte]Key{}}
	for i, key := range f.Keys {
		d, err := hex.DecodeString(key.SHA256)
		if err != nil || len(d) != sha256.Size {
			return nil, fmt.Errorf("key file %s: keys[%d].sha256 must be 64 hex digits (the SHA-256 of the key; kioku key prints it)", path, i)
		}
		if key.App != AllApps {
			if err := sessions.ValidateID(fmt.Sprintf("keys[%d].app", i), key.App, sessions.AppIDChars); err != nil {
				return nil, fmt.Errorf("key file %s: %v (or \"*\" for every app)", path, err)
			}
		}
		var digest [sha256.Size]byte
		copy(digest[:], d)
		if _, dup := k.byDigest[digest]; dup {
			return nil, fmt.Errorf("key file %s: keys[%d] repeats the digest of an earlier key", path, i)
		}
		k.byDigest[digest] = key
	}
	if len(k.byDigest) == 0 {
		return nil, fmt.Errorf("key file %s has no keys", path)
	}
	return k, nil
}

// NewKey returns a new random key and its key-file entry.
func NewKey(name, app string) (string, Key) {
	var b [32]byte
	rand.Read(b[:])
	key := "kioku_" + base64.RawURLEncoding.EncodeToString(b[:])
	d := sha256.Sum256([]byte(key))
	return key, Key{Name: name, App: app, SHA256: hex.EncodeToString(d[:])}
}

// lookup returns the entry of a presented key.
func (k *Keys) lookup(key string) (Key, bool) {
	e, ok := k.byDigest[sha256.Sum256([]byte(key))]
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
	return key, nil
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
			if err := confine(key, m.ProtoReflect()); err != nil {
				return nil, err
			}
		}
		return next(ctx, req)
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
		return next(ctx, &confinedConn{StreamingHandlerConn: conn, key: key})
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
		return confine(c.key, m.ProtoReflect())
	}
	return nil
}

// nameFields are the fields that hold resource names.
var nameFields = map[protoreflect.Name]bool{"name": true, "parent": true, "session": true}

// confine checks the resource names of a message, at any depth, against a
// key's app.
func confine(key Key, m protoreflect.Message) error {
	if key.App == AllApps {
		return nil
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					err = confine(key, mv.Message())
					return err == nil
				})
			}
		case fd.IsList():
			if fd.Kind() == protoreflect.MessageKind {
				for i := range v.List().Len() {
					if err = confine(key, v.List().Get(i).Message()); err != nil {
						break
					}
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			err = confine(key, v.Message())
		case fd.Kind() == protoreflect.StringKind && nameFields[fd.Name()]:
			if app, ok := appOf(v.String()); ok && app != key.App {
				err = connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s names app %q; this API key may reach app %q only", fd.Name(), app, key.App))
			}
		}
		return err == nil
	})
	return err
}

// appOf returns the app of a resource name apps/{app}/...
func appOf(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "apps/")
	if !ok {
		return "", false
	}
	app, _, _ := strings.Cut(rest, "/")
	return app, true
}

package transport

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/fault"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/resource"
)

// authService serves kioku.v1.AuthService: it mints user tokens with the
// server's signing keys (nil: it has none, and the service is not
// implemented here). The Guard lets only app keys call it (AppAdmin).
type authService struct {
	keys *auth.SigningKeys
	now  func() time.Time
}

var _ kiokuv1connect.AuthServiceHandler = authService{}

func (s authService) MintUserToken(_ context.Context, req *connect.Request[kiokuv1.MintUserTokenRequest]) (*connect.Response[kiokuv1.MintUserTokenResponse], error) {
	if s.keys == nil {
		return nil, fault.New(fault.Unimplemented, "kioku.v1.AuthService.MintUserToken is not implemented on this server: start it with --token-signing-key-file")
	}
	app, user, err := resource.ParseUser("parent", req.Msg.GetParent())
	if err != nil {
		return nil, err
	}
	var ttl time.Duration
	if req.Msg.Ttl != nil {
		if err := req.Msg.Ttl.CheckValid(); err != nil {
			return nil, fault.InvalidField("ttl", "ttl: %v", err)
		}
		if ttl = req.Msg.Ttl.AsDuration(); ttl < time.Second || ttl > auth.MaxTokenTTL {
			return nil, fault.InvalidField("ttl", "ttl %v: want between 1s and %v (unset: %v)", ttl, auth.MaxTokenTTL, auth.DefaultTokenTTL)
		}
	}
	tok, exp, err := s.keys.Mint(app, user, ttl, s.now())
	if err != nil {
		return nil, fault.Invalidf("%v", err)
	}
	return connect.NewResponse(&kiokuv1.MintUserTokenResponse{Token: tok, ExpireTime: timestamppb.New(exp)}), nil
}

// protectedResource serves the OAuth 2.0 Protected Resource Metadata of
// RFC 9728 at /.well-known/oauth-protected-resource (and, for a resource
// with a path, /.well-known/oauth-protected-resource/PATH): the
// authorization servers are the issuers of the identity file, so that an
// MCP host finds where its users sign in. Tokens go in the Authorization
// header only.
func protectedResource(providers *auth.Providers, tls bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		scheme := "http"
		if tls || r.TLS != nil {
			scheme = "https"
		}
		resource := scheme + "://" + r.Host
		if p := r.PathValue("path"); p != "" {
			resource += "/" + strings.TrimSuffix(p, "/")
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		json.NewEncoder(w).Encode(map[string]any{
			"resource":                 resource,
			"authorization_servers":    providers.Issuers(),
			"bearer_methods_supported": []string{"header"},
			"resource_name":            "kioku",
		})
	}
}

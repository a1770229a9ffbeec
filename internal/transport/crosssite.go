package transport

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/internal/transport/httperr"
)

// Cross-site safety. A server without API keys (the default, on loopback)
// must not be driven by a web page the person running it happens to open.
// Three rules, checked before anything else reads a request:
//
//   - a request carrying an Origin header (every request a browser sends
//     cross-site with a body, and every CORS request) is refused unless
//     Config.CORSOrigins lists the origin: kioku serves no pages, so no
//     page of its own calls it;
//   - a request that changes state (any method but GET, HEAD and OPTIONS)
//     with a body a browser may send to another site without a CORS
//     preflight (Content-Type text/plain, application/x-www-form-urlencoded
//     or multipart/form-data) is refused whatever its Origin, for browsers
//     that leave Origin out: no client of kioku's sends those;
//   - while the server listens on loopback in plaintext, a request whose
//     Host is not a loopback name (localhost, *.localhost, 127.0.0.0/8,
//     [::1]) nor one of Config.AllowedHosts is refused: a page whose name
//     an attacker rebinds to 127.0.0.1 (DNS rebinding) sends its own name
//     as Host. Over TLS the browser itself refuses such a page (kioku's
//     certificate does not name it), so any Host is answered.
//
// Every real client is unaffected: Connect, gRPC and gRPC-Web send their
// own content types and no Origin outside a browser; browsers of the
// allowed origins pass; REST clients send application/json.

// crossSite applies the rules to every request of next.
type crossSite struct {
	next    http.Handler
	origins []string // allowed, canonical (ParseCORSOrigins)
	hosts   []string // allowed beyond loopback names, lower case; "*": any
	// beyondLoopback is set once the server listens on an address other
	// than a loopback one (Serve); the Host rule then no longer applies.
	beyondLoopback *atomic.Bool
	google         []string // path prefixes whose errors are in Google's envelope
	procedures     map[string]bool
	errw           *connect.ErrorWriter
	refused        func(r *http.Request, reason string, err *connect.Error)
}

func (c *crossSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err, reason := c.check(r); err != nil {
		c.refused(r, reason, err)
		c.write(w, r, err)
		return
	}
	c.next.ServeHTTP(w, r)
}

// check returns why a request is refused, or nil.
func (c *crossSite) check(r *http.Request) (*connect.Error, string) {
	if origin := r.Header.Get("Origin"); origin != "" && !slices.Contains(c.origins, strings.ToLower(origin)) {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"requests from web pages of origin %q are refused: start kioku with --cors-origins %s to let that origin's pages call it",
			trunc(origin), trunc(origin))), "origin_not_allowed"
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); simpleContentTypes[mt] {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(
				"Content-Type %s is refused on %s requests: a web page can send it to any site without asking (a CORS simple request); send the body as Content-Type: application/json (curl: -H 'Content-Type: application/json'), or in the content type of your protocol (Connect, gRPC)",
				mt, r.Method)), "cross_site_content_type"
		}
	}
	if host := hostOf(r.Host); r.TLS == nil && !c.beyondLoopback.Load() && onLoopback(r) && !loopbackName(host) && !c.hostAllowed(host) {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"this server listens on loopback and answers requests addressed to loopback names (localhost, 127.0.0.1, [::1]); Host %q is refused, as a page using DNS rebinding would send it: start kioku with --allowed-hosts %s to answer that name",
			trunc(r.Host), trunc(host))), "host_not_allowed"
	}
	return nil, ""
}

// simpleContentTypes are the content types a browser sends cross-site
// without a preflight.
var simpleContentTypes = map[string]bool{
	"text/plain": true, "application/x-www-form-urlencoded": true, "multipart/form-data": true,
}

func trunc(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

// hostOf returns the host of a Host header, without the port or the
// brackets of an IPv6 literal, in lower case.
func hostOf(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
}

// loopbackName reports whether a host names loopback: localhost (and its
// subdomains, which resolve to loopback by RFC 6761), an address in
// 127.0.0.0/8 or ::1. The empty host (a client that sends none) passes.
func loopbackName(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if host == "" || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c *crossSite) hostAllowed(host string) bool {
	return slices.Contains(c.hosts, "*") || slices.Contains(c.hosts, strings.TrimSuffix(host, "."))
}

// onLoopback reports whether a request came in on a loopback address.
func onLoopback(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// write answers a refused request in its protocol: Connect, gRPC or
// gRPC-Web on a procedure's path when it speaks one, else JSON in the
// shape of the REST API of its path.
func (c *crossSite) write(w http.ResponseWriter, r *http.Request, err *connect.Error) {
	switch {
	case c.procedures[r.URL.Path] && c.errw.IsSupported(r):
		c.errw.Write(w, r, err)
	case slices.ContainsFunc(c.google, func(p string) bool { return strings.HasPrefix(r.URL.Path, p) }):
		httperr.WriteGoogle(w, err)
	default:
		httperr.WriteStatus(w, err)
	}
}

// ParseAllowedHosts checks a comma-separated list of host names for
// Config.AllowedHosts and returns them in lower case; "*" allows any. A
// name with a port, a scheme or a path is refused, naming the entry.
func ParseAllowedHosts(list string) ([]string, error) {
	var out []string
	for h := range strings.SplitSeq(list, ",") {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "":
			continue
		case h == "*":
		case strings.ContainsAny(h, ":/@?#*[] "):
			return nil, fmt.Errorf("host %q: give bare host names such as kioku.internal (no scheme, port or path), or * for any", h)
		}
		out = append(out, strings.TrimSuffix(h, "."))
	}
	return out, nil
}

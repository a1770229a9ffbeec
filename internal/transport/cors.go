package transport

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	connectcors "connectrpc.com/cors"
	"github.com/rs/cors"
)

// ParseCORSOrigins checks a comma-separated list of exact origins
// (scheme://host[:port], as a browser sends them in Origin) for
// Config.CORSOrigins and returns them in canonical form (lower case, no
// trailing slash). A wildcard, a path, a query or a scheme other than http
// and https is refused, naming the entry.
func ParseCORSOrigins(list string) ([]string, error) {
	var out []string
	for o := range strings.SplitSeq(list, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if strings.Contains(o, "*") {
			return nil, fmt.Errorf("origin %q: give exact origins such as https://app.example.com; wildcards are not accepted", o)
		}
		u, err := url.Parse(strings.TrimSuffix(o, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("origin %q: want scheme://host[:port] with scheme http or https and nothing after, such as https://app.example.com", o)
		}
		out = append(out, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	return out, nil
}

// withCORS lets pages of the given origins call every protocol of the
// server from a browser: Connect, gRPC-Web and REST. The methods, request
// headers and exposed headers are those connectrpc.com/cors lists for
// Connect and gRPC-Web, plus the two headers that carry API keys
// (Authorization and x-goog-api-key, which Google's clients send) and the
// REST methods PATCH and DELETE. No cookies are involved (keys travel in a
// header), so credentials mode stays off. Preflights are cached for two
// hours. Requests from other origins get no CORS headers, and the browser
// refuses them.
func withCORS(h http.Handler, origins []string) http.Handler {
	return cors.New(cors.Options{
		AllowedOrigins: origins,
		AllowedMethods: slices.Concat(connectcors.AllowedMethods(), []string{http.MethodPatch, http.MethodDelete}),
		AllowedHeaders: slices.Concat(connectcors.AllowedHeaders(), []string{"Authorization", "X-Goog-Api-Key"}),
		ExposedHeaders: connectcors.ExposedHeaders(),
		MaxAge:         int((2 * time.Hour).Seconds()),
	}).Handler(h)
}

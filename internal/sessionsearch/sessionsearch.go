// Package sessionsearch holds what the search of session events shares
// between the service that ranks hits (package sessions) and the stores
// that choose candidates (package sessions/sessiondriver's helpers): the
// text of an event that is searched, and BM25's inverse document
// frequency. Both must compute them alike, and neither is part of what a
// caller or a backend names.
package sessionsearch

import (
	"math"

	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// IDF is BM25's inverse document frequency of a term found in df of n
// events.
func IDF(n, df float64) float64 {
	df = min(max(df, 0), n)
	return math.Log(1 + (n-df+0.5)/(df+0.5))
}

// Text returns the text of an event that search indexes: its author
// ("Caroline: ...", so that a question naming a speaker finds what they
// said) and the text parts of its content, thoughts left out. Tool calls
// and results are not searched.
func Text(e *sessiontype.Event) string { return e.Author + ": " + e.Content.Text() }

package redact

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Addresses are caught where they have a shape: a house number, one to
// four capitalised words and a street type ("221B Baker Street", "1600
// Pennsylvania Avenue NW, Suite 4"); the French and German orders ("12
// rue de la Paix", "Hauptstraße 5"); a PO box; a Japanese address from its
// municipality (市, 区, 町, 村, 郡) to its block numbers ("東京都千代田区
// 千代田1-1", "横浜市中区山下町1丁目2番3号"); postal codes that cannot be
// taken for anything else: Japan's after 〒, the UK's, and a US ZIP code
// after a city and a state ("Springfield, IL 62704"). An address without
// such a shape (a building's name, "the blue house by the station", a
// city alone) is not caught.
var addressPatterns = []anchored{
	// A house number, capitalised words, a street type.
	{regexp.MustCompile(`\b[0-9]{1,5}[A-Za-z]?(?:-[0-9]{1,5})?\s{1,3}(?:(?:N|S|E|W|North|South|East|West)\.?\s{1,3})?(?:[A-Z][A-Za-z'.-]{0,30}\s{1,3}){1,4}` +
		`(?:(?i:street|avenue|road|boulevard|lane|drive|court|place|terrace|way|parkway|highway|square|crescent|close|circle|row|mews|gardens|grove)\b|(?i:st|ave|rd|blvd|ln|dr|ct|pl|pkwy|hwy|sq|cir)\b\.?)` +
		`(?:\s{1,3}(?:N|S|E|W|NE|NW|SE|SW)\b)?(?:,?\s{1,3}(?i:apt|apartment|suite|ste|unit|flat|floor|fl)\.?\s{0,3}#?[A-Za-z0-9-]{1,6}|,?\s{1,3}#[A-Za-z0-9-]{1,6})?`), 0, 260,
		func(text string, d digits) bool {
			i := d.end
			if i < len(text) && text[i] == '-' {
				for i++; i < len(text) && isDigitByte(text[i]); i++ {
				}
			}
			if i < len(text) && isLatin(rune(text[i])) {
				i++
			}
			i, ok := spaces(text, i)
			return ok && i < len(text) && isUpper(text[i])
		}},
	// French: a number, a street type, a name.
	{regexp.MustCompile(`\b[0-9]{1,4}(?:\s?(?:bis|ter))?,?\s{1,3}(?i:rue|avenue|boulevard|bd|place|chemin|allée|impasse|quai|route|cours)\s{1,3}` +
		`(?:(?:de la|de l'|du|des|de|d')\s{0,3})?\p{Lu}[\p{L}'-]{0,30}(?:\s{1,3}(?:de |du |des |la |le )?\p{Lu}[\p{L}'-]{0,30}){0,3}`), 0, 360,
		func(text string, d digits) bool {
			i := d.end
			if i < len(text) && text[i] == ',' {
				i++
			}
			i, ok := spaces(text, i)
			return ok && i < len(text) && strings.IndexByte("rRaAbBpPcCiIqQ", text[i]) >= 0
		}},
	// German: a street name ending in its type, a number.
	{regexp.MustCompile(`(?:\p{Lu}[\p{L}-]{0,40}(?:straße|strasse|str\.|weg|platz|allee|gasse)|\p{Lu}[\p{L}-]{0,40}\s{1,3}(?:Straße|Strasse|Str\.|Weg|Platz|Allee|Gasse))\s{1,3}[0-9]{1,4}[a-z]?\b`), 200, 6,
		func(text string, d digits) bool { return afterWord(text, d.start) }},
	// A PO box.
	{regexp.MustCompile(`\b(?i:p\.?\s?o\.?\s?box|post office box)\s{1,3}[0-9]{1,6}\b`), 24, 7,
		func(text string, d digits) bool { return afterWord(text, d.start) }},
	// A UK postcode, found from its inward code ("6XE").
	{regexp.MustCompile(`\b[A-PR-UWYZ][A-HK-Y]?[0-9][A-Z0-9]? [0-9][ABD-HJLNP-UW-Z]{2}\b`), 5, 3,
		func(text string, d digits) bool {
			return d.end-d.start == 1 && d.start > 0 && text[d.start-1] == ' ' && d.end+1 < len(text) && isUpper(text[d.end]) && isUpper(text[d.end+1])
		}},
	// A US city, state and ZIP code.
	{regexp.MustCompile(`\b[A-Z][a-z]{1,30}(?: [A-Z][a-z]{1,30}){0,2}, (?:AL|AK|AZ|AR|CA|CO|CT|DE|DC|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI|MN|MS|MO|MT|NE|NV|NH|NJ|NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY) [0-9]{5}(?:-[0-9]{4})?\b`), 105, 10,
		func(text string, d digits) bool {
			a := d.start
			return d.end-a == 5 && a >= 5 && text[a-5] == ',' && text[a-4] == ' ' && isUpper(text[a-3]) && isUpper(text[a-2]) && text[a-1] == ' '
		}},
	// A Japanese postal code after 〒.
	{regexp.MustCompile(`〒 ?[0-9]{3}-?[0-9]{4}`), 4, 9,
		func(text string, d digits) bool {
			return strings.HasSuffix(text[:d.start], "〒") || strings.HasSuffix(text[:d.start], "〒 ")
		}},
	// A Japanese address: a municipality, a town, block numbers.
	{regexp.MustCompile(`(?:北海道|東京都|京都府|大阪府|\p{Han}{2,3}県)?[\p{Han}\p{Katakana}ー]{1,8}?[市区町村郡](?:[\p{Han}\p{Katakana}ー]{1,8}?[区町村])?[\p{Han}\p{Katakana}ー]{0,10}?` +
		`[0-9]{1,4}(?:丁目(?:[0-9]{1,4}(?:番地?(?:[0-9]{1,4}号?)?|-[0-9]{1,4}(?:-[0-9]{1,4})?)?)?|番地?(?:[0-9]{1,4}号?|の[0-9]{1,4})?|-[0-9]{1,4}(?:-[0-9]{1,4})?)`), 132, 60,
		func(text string, d digits) bool {
			r, _ := utf8.DecodeLastRuneInString(text[:d.start])
			if r != 'ー' && !unicode.In(r, unicode.Han, unicode.Katakana) {
				return false
			}
			rest := text[d.end:]
			return strings.HasPrefix(rest, "丁目") || strings.HasPrefix(rest, "番") || len(rest) > 1 && rest[0] == '-' && isDigitByte(rest[1])
		}},
}

func findAddresses(t *target, emit func(start, end int, c Category)) {
	text := t.text
	runs := t.digitRuns()
	if len(runs) == 0 {
		return
	}
	check := func(text string, start, end int) bool {
		return !isLatin(before(text, start)) && !isDigit(after(text, end))
	}
	for _, a := range addressPatterns {
		a.find(text, runs, check, func(start, end int) { emit(start, end, Address) })
	}
}

// spaces skips one to three white spaces at i.
func spaces(text string, i int) (int, bool) {
	j := i
	for j < len(text) && j < i+3 && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n') {
		j++
	}
	return j, j > i
}

// afterWord reports whether a number at i follows a word and a space.
func afterWord(text string, i int) bool {
	if i < 2 || text[i-1] != ' ' {
		return false
	}
	r := before(text, i-1)
	return r == '.' || unicode.IsLetter(r)
}

// isLatin reports whether r is an ASCII letter or digit, or '_'.
func isLatin(r rune) bool {
	return r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

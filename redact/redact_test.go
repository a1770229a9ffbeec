package redact_test

import (
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/redact"
)

// cases are synthetic personal data in the formats people write it (the
// documentation ranges of addresses and numbers, test card numbers, ids
// with valid check digits), and texts that look like it but are not.
var cases = []struct{ name, in, want string }{
	// E-mail addresses.
	{"email", "Mail me at ann.lee+kioku@example.co.uk today.", "Mail me at [EMAIL] today."},
	{"email upper case", "ANN@EXAMPLE.COM", "[EMAIL]"},
	{"email in brackets", "<ann@example.com>, mailto:bob@example.org", "<[EMAIL]>, mailto:[EMAIL]"},
	{"email full-width", "ａｎｎ＠ｅｘａｍｐｌｅ．ｃｏｍに送ってください", "[EMAIL]に送ってください"},
	{"email in Japanese", "メールはann@example.jpです。", "メールは[EMAIL]です。"},
	{"email in JSON", `{"email":"a.b@example.com"}`, `{"email":"[EMAIL]"}`},
	{"not an email", "@ann on chat, a@b, user@localhost", "@ann on chat, a@b, user@localhost"},

	// Phone numbers.
	{"NANP", "Call 212-555-0199 or (212) 555-0199.", "Call [PHONE] or [PHONE]."},
	{"NANP dots and 1", "212.555.0199, 1-800-555-0199, 1 (212) 555 0199", "[PHONE], [PHONE], [PHONE]"},
	{"NANP international", "+1 (212) 555-0199", "[PHONE]"},
	{"UK", "020 7946 0958 or +44 20 7946 0958", "[PHONE] or [PHONE]"},
	{"UK with (0)", "+44 (0)20 7946 0958", "[PHONE]"},
	{"international prefix 00", "0044 20 7946 0958", "[PHONE]"},
	{"France", "01 23 45 67 89", "[PHONE]"},
	{"Germany", "030 12345678, 030/1234567, +49 30 1234567", "[PHONE], [PHONE], [PHONE]"},
	{"Japan landline", "電話は03-1234-5678です。", "電話は[PHONE]です。"},
	{"Japan mobile", "携帯：090-1234-5678", "携帯：[PHONE]"},
	{"Japan free dial", "0120-123-456までお電話ください", "[PHONE]までお電話ください"},
	{"Japan parentheses", "(03)1234-5678、03(1234)5678", "[PHONE]、[PHONE]"},
	{"Japan full-width", "０９０－１２３４－５６７８", "[PHONE]"},
	{"Japan full-width parentheses", "０３（１２３４）５６７８", "[PHONE]"},
	{"Japan long vowel mark as dash", "090ー1234ー5678", "[PHONE]"},
	{"Japan contiguous", "09012345678に電話して", "[PHONE]に電話して"},
	{"Japan international", "+81 90-1234-5678 / +81-3-1234-5678", "[PHONE] / [PHONE]"},
	{"Japan international full-width", "＋８１　９０　１２３４　５６７８", "[PHONE]"},
	{"Korea", "010-1234-5678로 연락주세요", "[PHONE]로 연락주세요"},
	{"China international", "+86 138 0013 8000", "[PHONE]"},
	{"phone then card", "call 090-1234-5678 4111 1111 1111 1111", "call [PHONE] [CARD]"},

	// Payment cards (test numbers).
	{"card in fours", "Card 4111 1111 1111 1111.", "Card [CARD]."},
	{"card with dashes", "5555-5555-5555-4444", "[CARD]"},
	{"card contiguous", "4111111111111111", "[CARD]"},
	{"card Amex", "3782 822463 10005", "[CARD]"},
	{"card full-width", "カード番号は４１１１　１１１１　１１１１　１１１１です", "カード番号は[CARD]です"},
	{"card failing Luhn", "4111 1111 1111 1112", "4111 1111 1111 1112"},
	{"card mixed separators", "4111 1111-1111 1111", "4111 1111-1111 1111"},

	// Government ids.
	{"SSN", "SSN 123-45-6789", "SSN [GOVERNMENT_ID]"},
	{"SSN never issued", "000-12-3456, 666-12-3456, 912-34-5678", "000-12-3456, 666-12-3456, 912-34-5678"},
	{"My Number", "マイナンバーは1234 5678 9018です。", "マイナンバーは[GOVERNMENT_ID]です。"},
	{"My Number contiguous", "123456789018", "[GOVERNMENT_ID]"},
	{"My Number full-width", "１２３４－５６７８－９０１８", "[GOVERNMENT_ID]"},
	{"My Number bad check digit", "1234 5678 9012", "1234 5678 9012"},
	{"Aadhaar", "Aadhaar 2341 2341 2346", "Aadhaar [GOVERNMENT_ID]"},
	{"UK NINO", "NI AB 12 34 56 C and AB123456C", "NI [GOVERNMENT_ID] and [GOVERNMENT_ID]"},
	{"UK NINO excluded prefix", "GB123456A", "GB123456A"},
	{"Spanish DNI and NIE", "DNI 12345678Z, NIE X1234567L", "DNI [GOVERNMENT_ID], NIE [GOVERNMENT_ID]"},
	{"Spanish DNI bad letter", "12345678A", "12345678A"},
	{"Chinese resident id", "身份证号码11010519491231002X", "身份证号码[GOVERNMENT_ID]"},

	// Addresses.
	{"street", "I live at 221B Baker Street, London.", "I live at [ADDRESS], London."},
	{"street with suite", "1600 Pennsylvania Avenue NW, Suite 4", "[ADDRESS]"},
	{"street abbreviated", "42 Main St. in town", "[ADDRESS] in town"},
	{"street ending a sentence", "I live at 221B Baker Street. It is nice.", "I live at [ADDRESS]. It is nice."},
	{"UK postcode", "London NW1 6XE", "London [ADDRESS]"},
	{"US city state zip", "Springfield, IL 62704", "[ADDRESS]"},
	{"PO box", "PO Box 1234", "[ADDRESS]"},
	{"French", "12 rue de la Paix, Paris", "[ADDRESS], Paris"},
	{"German", "Hauptstraße 5 und Berliner Straße 12a", "[ADDRESS] und [ADDRESS]"},
	{"Japanese postal code", "〒100-0001", "[ADDRESS]"},
	{"Japanese block numbers", "東京都千代田区千代田1-1に住んでいます", "[ADDRESS]に住んでいます"},
	{"Japanese chome", "住所は横浜市中区山下町1丁目2番3号です", "住所は[ADDRESS]です"},
	{"Japanese full-width", "大阪府大阪市北区梅田３－１－３", "[ADDRESS]"},
	{"Japanese banchi", "札幌市中央区北一条西2番地", "[ADDRESS]"},
	{"Japanese not an address", "区間1-2は市場で3-4人", "区間1-2は市場で3-4人"},

	// IP addresses.
	{"IPv4", "from 192.0.2.10 and 198.51.100.0/24", "from [IP_ADDRESS] and [IP_ADDRESS]"},
	{"IPv6", "2001:db8::ff00:42:8329 and ::1 and fe80::1ff:fe23:4567:890a", "[IP_ADDRESS] and [IP_ADDRESS] and [IP_ADDRESS]"},
	{"IPv4 in IPv6", "::ffff:192.0.2.1", "[IP_ADDRESS]"},
	{"not IPs", "version 1.2.3.4.5, 256.1.1.1, std::vector, 00:1A:2B:3C:4D:5E", "version 1.2.3.4.5, 256.1.1.1, std::vector, 00:1A:2B:3C:4D:5E"},

	// What is not personal data stays.
	{"the prompt's lines", "[12] user: I said hello (2023-05-08 15:04)", "[12] user: I said hello (2023-05-08 15:04)"},
	{"dates and times", "On 01.02.2023 10 people came at 15:04:05; 2023/05/08", "On 01.02.2023 10 people came at 15:04:05; 2023/05/08"},
	{"numbers", "pi is 3.14159265358979; 1,000,000 yen; order 1234567890123; 12345", "pi is 3.14159265358979; 1,000,000 yen; order 1234567890123; 12345"},
	{"numbers in words", "abc4111111111111111 and 4111111111111111xyz", "abc4111111111111111 and 4111111111111111xyz"},
	{"placeholders", "[EMAIL] [PHONE] [CARD] [GOVERNMENT_ID] [ADDRESS] [IP_ADDRESS]", "[EMAIL] [PHONE] [CARD] [GOVERNMENT_ID] [ADDRESS] [IP_ADDRESS]"},
	{"invalid UTF-8 kept", "\xffann@example.com\xfe", "\xff[EMAIL]\xfe"},
	{"several", "Ann (ann@example.com, +81 90-1234-5678) paid with 4111 1111 1111 1111 from 192.0.2.1.",
		"Ann ([EMAIL], [PHONE]) paid with [CARD] from [IP_ADDRESS]."},
}

func TestRedact(t *testing.T) {
	r, err := redact.New(redact.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Redact(tc.in)
			if got != tc.want {
				t.Fatalf("Redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if again := r.Redact(got); again != got {
				t.Fatalf("not idempotent: %q, then %q", got, again)
			}
		})
	}
}

// TestCategories: only the categories named are redacted.
func TestCategories(t *testing.T) {
	in := "ann@example.com 090-1234-5678 4111 1111 1111 1111 123-45-6789 221B Baker Street 192.0.2.1"
	for _, tc := range []struct {
		cats []redact.Category
		want string
	}{
		{nil, "[EMAIL] [PHONE] [CARD] [GOVERNMENT_ID] [ADDRESS] [IP_ADDRESS]"},
		{[]redact.Category{redact.Email}, "[EMAIL] 090-1234-5678 4111 1111 1111 1111 123-45-6789 221B Baker Street 192.0.2.1"},
		{[]redact.Category{redact.Phone, redact.IPAddress}, "ann@example.com [PHONE] 4111 1111 1111 1111 123-45-6789 221B Baker Street [IP_ADDRESS]"},
		{[]redact.Category{redact.Card, redact.GovernmentID, redact.Address}, "ann@example.com 090-1234-5678 [CARD] [GOVERNMENT_ID] [ADDRESS] 192.0.2.1"},
	} {
		r, err := redact.New(redact.Rules{Categories: tc.cats})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Redact(in); got != tc.want {
			t.Errorf("categories %v:\n got %q\nwant %q", tc.cats, got, tc.want)
		}
	}
	if got := (*redact.Redactor)(nil).Redact(in); got != in {
		t.Errorf("a nil Redactor changed the text: %q", got)
	}
}

// TestPatterns: custom patterns match the text as written and with
// full-width characters made ASCII, and win over a category on the same
// span.
func TestPatterns(t *testing.T) {
	r, err := redact.New(redact.Rules{Patterns: []redact.Pattern{
		{Name: "EMPLOYEE_ID", Regex: `EMP-[0-9]{6}`},
		{Name: "PROJECT", Regex: `プロジェクト[Ａ-Ｚ]+`},
		{Name: "TEST_CARD", Regex: `4111 1111 1111 1111`},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"badge EMP-123456, ＥＭＰ－６５４３２１":            "badge [EMPLOYEE_ID], [EMPLOYEE_ID]",
		"プロジェクトＸＹＺの件":                             "[PROJECT]の件",
		"4111 1111 1111 1111 and ann@example.com": "[TEST_CARD] and [EMAIL]",
		"[EMPLOYEE_ID] stays":                     "[EMPLOYEE_ID] stays",
	} {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", in, got, want)
		}
	}
	// A pattern cannot eat a placeholder: its text is left alone.
	greedy, err := redact.New(redact.Rules{Patterns: []redact.Pattern{{Name: "CAPS", Regex: `[A-Z]{3,}`}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := greedy.Redact("ann@example.com ABC"), "[EMAIL] [CAPS]"; got != want {
		t.Errorf("a pattern over placeholders: %q, want %q", got, want)
	}
	// A pattern's placeholder that normalizing reads as '@' or '.' stays
	// a placeholder.
	at, err := redact.New(redact.Rules{Patterns: []redact.Pattern{{Name: "AT", Regex: `secret-[0-9]+`}, {Name: "DOT", Regex: `code-[0-9]+`}}})
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"mail secret-1 example.com": "mail [AT] example.com",
		"john@example code-1 com":   "john@example [DOT] com",
	} {
		if got := at.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestValidate: bad rules are refused with an error naming the field, the
// pattern and the limit.
func TestValidate(t *testing.T) {
	many := make([]redact.Pattern, redact.MaxPatterns+1)
	for i := range many {
		many[i] = redact.Pattern{Name: "P" + strings.Repeat("X", i), Regex: "x"}
	}
	for name, tc := range map[string]struct {
		rules redact.Rules
		want  string
	}{
		"unknown category":   {redact.Rules{Categories: []redact.Category{"NAME"}}, `pii.categories[0]: "NAME" is not a category; the categories are EMAIL, PHONE`},
		"category twice":     {redact.Rules{Categories: []redact.Category{redact.Email, redact.Email}}, "pii.categories[1]: EMAIL is given twice"},
		"too many patterns":  {redact.Rules{Patterns: many}, "pii.custom_patterns has 17 patterns; the limit is 16"},
		"bad name":           {redact.Rules{Patterns: []redact.Pattern{{Name: "emp id", Regex: "x"}}}, "pii.custom_patterns[0] (emp id): name must be"},
		"built-in name":      {redact.Rules{Patterns: []redact.Pattern{{Name: "EMAIL", Regex: "x"}}}, "pii.custom_patterns[0] (EMAIL): name is a built-in category"},
		"name twice":         {redact.Rules{Patterns: []redact.Pattern{{Name: "A", Regex: "x"}, {Name: "A", Regex: "y"}}}, "pii.custom_patterns[1] (A): name is used twice"},
		"no regex":           {redact.Rules{Patterns: []redact.Pattern{{Name: "A"}}}, "pii.custom_patterns[0] (A): regex is required"},
		"not RE2":            {redact.Rules{Patterns: []redact.Pattern{{Name: "LOOK", Regex: `(?=x)y`}}}, "pii.custom_patterns[0] (LOOK): regex is not valid RE2"},
		"too long":           {redact.Rules{Patterns: []redact.Pattern{{Name: "LONG", Regex: strings.Repeat("a", redact.MaxPatternBytes+1)}}}, "pii.custom_patterns[0] (LONG): regex is 513 bytes; the limit is 512"},
		"too big a program":  {redact.Rules{Patterns: []redact.Pattern{{Name: "BIG", Regex: `[a-z]{1000}[0-9]{1000}[A-Z]{1000}x{1000}y{1000}`}}}, "pii.custom_patterns[0] (BIG): regex compiles to"},
		"matches empty text": {redact.Rules{Patterns: []redact.Pattern{{Name: "EMPTY", Regex: `x*`}}}, "pii.custom_patterns[0] (EMPTY): regex \"x*\" matches the empty text"},
	} {
		err := tc.rules.Validate("pii")
		if !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want invalid argument containing %q", name, err, tc.want)
		}
		if _, err := redact.New(tc.rules); err == nil {
			t.Errorf("%s: New accepted the rules", name)
		}
	}
	ok := redact.Rules{Categories: []redact.Category{redact.Phone}, Patterns: []redact.Pattern{{Name: "A_1", Regex: `(?i)secret-[0-9]+`}}}
	if err := ok.Validate("pii"); err != nil {
		t.Errorf("valid rules refused: %v", err)
	}
}

// BenchmarkRedact measures a conversation's worth of text with a little
// personal data in it.
func BenchmarkRedact(b *testing.B) {
	r, err := redact.New(redact.Rules{})
	if err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	for i := range 200 {
		sb.WriteString("[")
		sb.WriteString(strings.Repeat("1", i%3+1))
		sb.WriteString("] user: I moved to Sapporo last month and I prefer green tea; 今日は雨でした。 (2023-05-08 15:04)\n")
		if i%20 == 0 {
			sb.WriteString("[9] user: reach me at ann@example.com or 090-1234-5678 (2023-05-08 15:04)\n")
		}
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		r.Redact(text)
	}
}

package redact

// confusables are the Cyrillic and Greek letters that look like ASCII
// letters, with those letters: "jоhn@example.com" with a Cyrillic 'о' is
// read as John's address. They are read so only in a Latin word
// (latinWord): a Russian or Greek word keeps its letters. (Unicode's
// confusables.txt, UTS #39, maps much more, and to sequences: "m" to "rn";
// the letters here are those one character of a Latin address can be
// swapped for unseen.)
var confusables = map[rune]rune{
	// Cyrillic.
	'а': 'a', 'с': 'c', 'ԁ': 'd', 'е': 'e', 'һ': 'h', 'і': 'i', 'ј': 'j', 'ӏ': 'l', 'о': 'o',
	'р': 'p', 'ԛ': 'q', 'ѕ': 's', 'ѵ': 'v', 'ԝ': 'w', 'х': 'x', 'у': 'y',
	'А': 'A', 'В': 'B', 'С': 'C', 'Е': 'E', 'Н': 'H', 'І': 'I', 'Ј': 'J', 'К': 'K', 'М': 'M',
	'О': 'O', 'Р': 'P', 'Ѕ': 'S', 'Т': 'T', 'Х': 'X', 'Ү': 'Y', 'Ԛ': 'Q', 'Ԝ': 'W',
	// Greek.
	'α': 'a', 'ι': 'i', 'ν': 'v', 'ο': 'o', 'ρ': 'p', 'υ': 'u', 'χ': 'x',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N',
	'Ο': 'O', 'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
}

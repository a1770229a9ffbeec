// Package redact finds personal data in text and replaces it with typed
// placeholders ("[EMAIL]", "[PHONE]", "[CARD]", "[GOVERNMENT_ID]",
// "[ADDRESS]", "[IP_ADDRESS]", or a custom pattern's "[NAME]"), so that a
// model provider never sees it. The memory bank runs it, when an app's
// configuration turns it on, over every text it sends to a model
// (Generator) and every memory fact it stores.
//
// It is deterministic rules, no model: each category is found by its
// shape and, where it has one, its check digit, in English, Japanese and
// the international formats. The rules read a text normalised (normalize):
// format characters such as the zero-width space ignored, every Unicode
// space a space and every decimal digit ASCII, full-width forms, HTML
// character references and Cyrillic or Greek look-alikes of Latin letters
// read as what they stand for, and "[at]", "(dot)" and addresses spelled
// out ("john at example dot com") as '@' and '.'; what they find is
// replaced in the text as written, invisible characters inside it
// included, and the rest is kept byte for byte. testdata/variants.jsonl is
// a corpus of such variants that the tests redact whole. The categories'
// documentation says what each catches. It cannot catch what has no shape:
// names of people and places, addresses written without a house number
// and street type (or, in Japanese, without block numbers), identity or
// account numbers without a check digit or a fixed form, numbers spelled
// out in words or split across messages, and anything inside images and
// files. Numbers of the
// right shape that are not personal data are redacted too: a 16-digit
// order number that passes the Luhn check becomes "[CARD]".
//
// Placeholders are not numbered: a memory outlives the request it was
// extracted in, and a number that meant one address in one request would
// mean another in the next. Redact is idempotent (the placeholders it
// writes are left alone) and runs in time linear in the text.
package redact

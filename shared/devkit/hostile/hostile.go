// Package hostile is the alphabet of what encoders change, for the test
// tooling's payloads (the chaos run, the explorer, the remote simulator):
// <, > and & (which encoding/json writes as \u003c, six bytes for one),
// control characters, U+FFFD, U+2028 and U+2029, characters of two to four
// bytes, quotes and backslashes; and, in what a service answers, raw
// control bytes, invalid UTF-8, XML and HTML: not JSON at all.
//
// What travels on SQS (an order, an event) must be valid UTF-8 without raw
// control characters, which SQS refuses: there a control character is a
// JSON escape (\u0001, six bytes for one byte of the value) and the rest is
// raw (Quote). What a service answers over HTTP may be anything (Body).
//
// Every size here is exact and measured on the bytes that travel: a
// string's as its JSON literal (QuoteLen), an answer's as its body, or as
// the product quotes it when it keeps an answer that is not JSON as a JSON
// string (MarshalLen: encoding/json's, its HTML escapes off). The same
// seed gives the same bytes.
package hostile

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"unicode/utf8"
)

// markup is what three pieces in four are: the characters json.Marshal
// writes as six bytes each (\u003c), so that a value of them grows
// threefold in a message built with it (the product's encoder, with its
// HTML escapes off, keeps them as they are: these payloads would show it
// if it did not).
const markup = "<>&"

// textPieces are what a value's text is made of besides markup: every
// character is valid UTF-8 (a value travels on SQS), the ones encoders
// change most often.
var textPieces = []string{
	"<b>", "</script>", "&amp;", "<![CDATA[", "]]>", "<?xml?>",
	"\x00", "\x01", "\x01", "\x07", "\x1b", "\x1f", "\t", "\n", "\r", "\b", "\f",
	`"`, `\`, "\x7f", "\ufffd", "\ufffd", "\u2028", "\u2029", "é", "日本", "🙂", "\u200b", "\ufeff",
	"/", "'", " ", "a", "Z", "0",
}

// bodyPieces are what an answer that is not JSON is made of: the text's
// pieces, raw, and invalid UTF-8 (each ending in ASCII, so that no two
// pieces side by side make a valid character).
var bodyPieces = append([]string{
	"\xff!", "\xfe!", "\xc3(", "\xe2\x82!", "\x80!", "\xed\xa0\x80!", "\xf4\x90\x80\x80!", "\xc0\xaf!",
	"<?xml version=\"1.0\"?>", "<a href=\"x?y=1&z=2\">", "</a>", "&#x1;", "<!-- \x01 -->",
}, textPieces...)

// padding is ASCII, one byte in every form: what fills a size exactly.
const padding = "abcdefghijklmnopqrstuvwxyz"

// Text is n bytes of hostile text, valid UTF-8 (from seed): a string
// value of an order or an event, as decoded.
func Text(seed uint64, n int) string {
	return string(build(seed, n, textPieces, func(p string) int { return len(p) }))
}

// TextQuoted is hostile text whose JSON literal (Quote: quotes, escapes
// and all) is n bytes (at least 2).
func TextQuoted(seed uint64, n int) string {
	return string(build(seed, n-2, textPieces, func(p string) int { return QuoteLen(p) - 2 }))
}

// Body is n bytes of what a service may answer that is not JSON (from
// seed): raw control bytes, invalid UTF-8, XML and HTML.
func Body(seed uint64, n int) []byte {
	return build(seed, n, bodyPieces, func(p string) int { return len(p) })
}

// BodyMarshalled is a body (as Body) whose JSON string, as the product
// keeps it (MarshalLen), is n bytes (at least 2): an answer that is not
// JSON, sized on what the product keeps of it.
func BodyMarshalled(seed uint64, n int) []byte {
	return build(seed, n-2, bodyPieces, func(p string) int { return MarshalLen([]byte(p)) - 2 })
}

// build is markup and pieces at random, then padding, until their measure
// is n.
func build(seed uint64, n int, pieces []string, measure func(string) int) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x4057113))
	pieces = append([]string{markup[:1], markup[1:2], markup[2:]}, pieces...)
	sizes := make([]int, len(pieces))
	for i, p := range pieces {
		sizes[i] = measure(p)
	}
	out := make([]byte, 0, max(n, 0))
	for left := n; left > 0; {
		i := rng.IntN(len(pieces)-len(markup)) + len(markup)
		if rng.IntN(4) > 0 {
			i = rng.IntN(len(markup))
		}
		if sizes[i] > left {
			out = append(out, padding[rng.IntN(len(padding))])
			left--
			continue
		}
		out = append(out, pieces[i]...)
		left -= sizes[i]
	}
	return out
}

// Quote is s as a JSON string literal as a sender that escapes no more than
// it must writes it: a control character as \u00XX, a quote and a
// backslash escaped, everything else raw (<, >, &, U+2028 and all). Invalid
// UTF-8 in s (none in Text's) becomes a raw U+FFFD, as SQS takes no other.
func Quote(s string) string {
	out := make([]byte, 0, QuoteLen(s))
	out = append(out, '"')
	for _, r := range s { // an invalid byte ranges as utf8.RuneError: U+FFFD
		switch {
		case r == '"' || r == '\\':
			out = append(out, '\\', byte(r))
		case r < 0x20:
			out = append(out, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			out = utf8.AppendRune(out, r)
		}
	}
	return string(append(out, '"'))
}

const hex = "0123456789abcdef"

// QuoteLen is len(Quote(s)).
func QuoteLen(s string) int {
	n := 2
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			n += 2
		case r < 0x20:
			n += 6
		default:
			n += utf8.RuneLen(r)
		}
	}
	return n
}

// MarshalLen is the length of b as the product keeps an answer that is
// not JSON: a JSON string as encoding/json's Encoder writes it with its
// HTML escapes off (shared/agent keeps it so): U+2028, U+2029 and control
// characters but \b, \f, \n, \r and \t as \u escapes (six bytes),
// each byte of invalid UTF-8 as \ufffd (six), a quote or a backslash
// escaped, <, > and & as they are.
func MarshalLen(b []byte) int {
	n := 2
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
			n += 2
		case r < 0x20 || r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
	}
	return n
}

// Marshal is v as JSON as a sender that escapes no more than it must
// writes it: encoding/json's, with <, > and & raw (and a json.RawMessage
// as it is, U+2028 and all).
func Marshal(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("marshal %T: %w", v, err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

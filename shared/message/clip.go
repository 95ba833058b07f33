package message

import "unicode/utf8"

// MaxReasonQuote bounds what a reason quotes of what it did not write
// itself: a service's answer, a value a jq expression met. A reason travels
// in a reply, an alert, a status message and a log line, each with a limit
// of its own; the state item keeps less (statestore.MaxErrorBytes).
const MaxReasonQuote = 1024

// Clip is s cut to at most n bytes, on a character boundary, ending in "…"
// when cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:max(cut, 0)] + "…"
}

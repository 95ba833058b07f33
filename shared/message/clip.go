package message

import "unicode/utf8"

// MaxReasonQuote bounds what a reason quotes of what it did not write
// itself: a service's answer, a value a jq expression met. A reason travels
// in a reply, an alert, a status message and a log line, each with a limit
// of its own; the state item keeps less (statestore.MaxErrorBytes).
const MaxReasonQuote = 1024

// MaxErrorBytes bounds the error a work message or a status carries: a
// refusal's reason as an Agent replies it (agent.MaxRefusalBytes), what it
// says and what it quotes. Escaped at its worst (control bytes) it is six
// times as long in the message (MaxEnvelopeBytes).
const MaxErrorBytes = 2 * MaxReasonQuote

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

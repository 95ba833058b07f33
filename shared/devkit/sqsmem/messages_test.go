package sqsmem

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A body is refused only for what SQS refuses: bytes that are not UTF-8 and
// characters outside #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
// #x10000-#x10FFFF. U+FFFD itself is taken (it was refused: ranging over a
// string yields it for an invalid byte too).
func TestABodyIsRefusedOnlyForWhatSQSRefuses(t *testing.T) {
	t.Parallel()
	for body, ok := range map[string]bool{
		"a":                        true,
		"\t\n\r":                   true,
		" ~\u007f\u0080é":          true,
		"\ud7ff":                   true,
		"\ue000":                   true,
		"\ufffd":                   true,
		"a\ufffdb":                 true,
		"\U00010000\U0010ffff":     true,
		`{"x":"\u0001"}`:           true, // an escape is text
		"\x00":                     false,
		"\x01":                     false,
		"\x1f":                     false,
		"\x0b":                     false,
		"\ufffe":                   false,
		"\uffff":                   false,
		"\xff":                     false,
		"\x80":                     false,
		"a\xc3":                    false, // cut short
		"\xed\xa0\x80":             false, // a surrogate, encoded
		"\xef\xbf\xbd\xff":         false, // U+FFFD, then a byte that is not UTF-8
		"\xc0\xaf":                 false, // an overlong encoding
		"ok until the end \x1b[0m": false,
	} {
		require.Equal(t, ok, validBody(body), "%q", body)
	}
}

package queue

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// RejectReasonText is reason as a message attribute can carry it: SQS
// takes in an attribute's value only the characters it takes in a body
// (#x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD, #x10000-#x10FFFF), and the
// SDK would send U+FFFD (three bytes) for an invalid UTF-8 byte. A reason
// quotes what it did not write (a body that is not JSON, a service's
// answer): each byte that is not UTF-8 is written \xNN and each character
// SQS refuses \uNNNN, so the reason is weighed as it travels.
func RejectReasonText(reason string) string {
	var b strings.Builder
	for i := 0; i < len(reason); {
		r, size := utf8.DecodeRuneInString(reason[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, reason[i])
		case sqsRefuses(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(reason[i : i+size])
		}
		i += size
	}
	return b.String()
}

// sqsRefuses reports whether r is a character SQS refuses in a message.
func sqsRefuses(r rune) bool {
	return (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0xFFFE || r == 0xFFFF
}

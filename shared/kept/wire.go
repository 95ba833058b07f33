package kept

import "bytes"

// SQS refuses a message body holding U+FFFE or U+FFFF (its characters are
// #x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD and #x10000-#x10FFFF), which a
// JSON text holds only in a string, where an escape says the same.
var (
	rawFFFE = []byte("\uFFFE")
	rawFFFF = []byte("\uFFFF")
)

// Wire is the JSON text b as it travels in a message: its U+FFFE and U+FFFF
// written \ufffe and \uffff (six bytes for three), b itself if it has none.
// Offload decides on it whether a value stays inline, and message.Encode
// writes every message so: what is weighed is what travels.
func Wire(b []byte) []byte {
	if !bytes.Contains(b, rawFFFE) && !bytes.Contains(b, rawFFFF) {
		return b
	}
	b = bytes.ReplaceAll(b, rawFFFE, []byte(`\ufffe`))
	return bytes.ReplaceAll(b, rawFFFF, []byte(`\uffff`))
}

package agent

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/sas-go/sas/shared/message"
)

// answer is a service's answer to a call that succeeded, and the form its
// step's result keeps it in: JSON with one meaning as it is; anything else
// (not JSON, or JSON with a member twice: message.ValidJSON) quoted as
// text, a JSON string. Every size that decides what becomes of an answer
// is the size of that kept form (kept), never of the answer as it came: a
// quoted answer may be six times as long ("<", ">", "&" and control bytes
// escaped, by encoding/json six bytes each) or three (an invalid UTF-8
// byte is kept as "\ufffd").
type answer struct {
	raw  []byte
	json bool // raw is JSON with one meaning: kept as it is
}

// answerOf is raw, judged JSON or text once.
func answerOf(raw []byte) answer { return answer{raw: raw, json: message.ValidJSON(raw)} }

// keptLen is the length of the answer's kept form (0: none), counted: no
// copy of it made.
func (a answer) keptLen() int {
	switch {
	case len(a.raw) == 0:
		return 0
	case a.json:
		return len(a.raw)
	}
	return textLen(a.raw)
}

// kept is the answer's kept form (nil: none), in one buffer of its size.
func (a answer) kept() json.RawMessage {
	switch {
	case len(a.raw) == 0:
		return nil
	case a.json:
		return a.raw
	}
	return appendText(make([]byte, 0, textLen(a.raw)), a.raw)
}

// textEscapes are the escapes of the ASCII bytes JSON text may not hold as
// they are, as encoding/json writes them with its HTML escapes off ("<",
// ">" and "&" as they are): "" for a byte kept as it is.
var textEscapes = func() (e [utf8.RuneSelf]string) {
	const hex = "0123456789abcdef"
	for c := range 0x20 {
		e[c] = `\u00` + string(hex[c>>4]) + string(hex[c&0xF])
	}
	e['\b'], e['\f'], e['\n'], e['\r'], e['\t'], e['"'], e['\\'] = `\b`, `\f`, `\n`, `\r`, `\t`, `\"`, `\\`
	return e
}()

// escapeAt is how JSON text writes the character of src at i: its escape
// ("" for as it is), and how many bytes of src it is.
func escapeAt(src []byte, i int) (string, int) {
	if c := src[i]; c < utf8.RuneSelf {
		return textEscapes[c], 1
	}
	switch r, size := utf8.DecodeRune(src[i:]); {
	case r == utf8.RuneError && size == 1:
		return `\ufffd`, 1
	case r == '\u2028':
		return `\u2028`, size
	case r == '\u2029':
		return `\u2029`, size
	default:
		return "", size
	}
}

// textLen is the length of src quoted as a JSON string (appendText).
func textLen(src []byte) int {
	n := 2
	for i := 0; i < len(src); {
		esc, size := escapeAt(src, i)
		if esc != "" {
			n += len(esc)
		} else {
			n += size
		}
		i += size
	}
	return n
}

// appendText appends src quoted as a JSON string, as encoding/json's
// Encoder with SetEscapeHTML(false) writes it.
func appendText(dst, src []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(src); {
		esc, size := escapeAt(src, i)
		if esc != "" {
			dst = append(append(dst, src[start:i]...), esc...)
			start = i + size
		}
		i += size
	}
	return append(append(dst, src[start:]...), '"')
}

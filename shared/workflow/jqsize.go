package workflow

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"
)

// encodedLen is the length of gojq.Marshal(v), counted with nothing made,
// and ok; or, once the count passes limit, ok false and no more counted.
// An expression's value is weighed so before it is encoded: a value that
// names one string a million times (`[range(1e6)] | map($doc)`) holds a
// few megabytes, and would be terabytes once encoded.
func encodedLen(v any, limit int) (int, bool) {
	c := lenCounter{limit: limit}
	c.add(v)
	return c.n, c.n <= limit
}

// lenCounter counts an encoding's bytes up to its limit.
type lenCounter struct {
	n, limit int
	buf      [64]byte
}

// over reports whether the count passed the limit.
func (c *lenCounter) over() bool { return c.n > c.limit }

func (c *lenCounter) add(v any) {
	if c.over() {
		return
	}
	switch v := v.(type) {
	case nil:
		c.n += len("null")
	case bool:
		c.n += len(strconv.FormatBool(v))
	case int:
		c.n += len(strconv.AppendInt(c.buf[:0], int64(v), 10))
	case float64:
		c.n += floatLen(c.buf[:0], v)
	case *big.Int:
		c.n += len(v.Append(c.buf[:0], 10))
	case json.Number:
		c.n += len(v)
	case string:
		c.n += stringLen(v, c.limit-c.n)
	case []any:
		c.n += 2 + max(len(v)-1, 0) // [ ] and the commas
		for _, e := range v {
			if c.add(e); c.over() {
				return
			}
		}
	case map[string]any:
		c.n += 2 + max(len(v)-1, 0) + len(v) // { } the commas and the colons
		for k, e := range v {
			if c.n += stringLen(k, c.limit-c.n); c.over() {
				return
			}
			c.add(e)
		}
	}
}

// floatLen is the length of f as gojq writes it: as encoding/json does,
// NaN as null and the infinities as the largest float64.
func floatLen(buf []byte, f float64) int {
	if math.IsNaN(f) {
		return len("null")
	}
	f = min(max(f, -math.MaxFloat64), math.MaxFloat64)
	format := byte('f')
	if x := math.Abs(f); x != 0 && x < 1e-6 || x >= 1e21 {
		format = 'e'
	}
	b := strconv.AppendFloat(buf, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		return n - 1 // e-09 written e-9
	}
	return len(b)
}

// stringLen is the length of s quoted as gojq quotes it (printable ASCII
// as it is, but for '"' and '\\'; \b \f \n \r \t; other control bytes and
// DEL as \u00XX; an invalid UTF-8 byte as \ufffd; other characters as they
// are), counted no further than room and a byte.
func stringLen(s string, room int) int {
	n := 2
	for i := 0; i < len(s) && n <= room; {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				n += len(`\ufffd`)
			} else {
				n += size
			}
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			n += 2
		case c < ' ' || c > '~':
			n += len(`\u0000`)
		default:
			n++
		}
		i++
	}
	return n
}

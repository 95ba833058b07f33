package sqsmem

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
)

// checkAttrs refuses message attributes SQS refuses: a missing or unknown
// data type, a value missing, more than ten, a string value with a
// character a body may not have (SQS: "the same restrictions on the
// content as the message body").
func checkAttrs(attrs map[string]attrValue) error {
	if len(attrs) > 10 {
		return invalidParameter("Number of message attributes [%d] exceeds the allowed maximum [10].", len(attrs))
	}
	for name, v := range attrs {
		base, _, _ := strings.Cut(v.DataType, ".")
		switch {
		case name == "" || len(name) > 256:
			return invalidParameter("Message attribute name %q is invalid.", name)
		case base != "String" && base != "Number" && base != "Binary":
			return invalidParameter("The message attribute '%s' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String.", name)
		case base == "Binary" && len(v.BinaryValue) == 0:
			return invalidParameter("The message attribute '%s' with type 'Binary' must use field 'Binary'.", name)
		case base != "Binary" && (v.StringValue == nil || *v.StringValue == ""):
			return invalidParameter("The message attribute '%s' must contain non-empty message attribute value for message attribute type '%s'.", name, base)
		case base != "Binary" && !validBody(*v.StringValue):
			return invalidParameter("Message attribute '%s' contains invalid characters.", name)
		}
	}
	return nil
}

// attrsSize is what message attributes count towards the message size:
// each name, data type and value.
func attrsSize(attrs map[string]attrValue) int {
	n := 0
	for name, v := range attrs {
		n += len(name) + len(v.DataType) + len(v.BinaryValue)
		if v.StringValue != nil {
			n += len(*v.StringValue)
		}
	}
	return n
}

// attrsMD5 is SQS's MD5OfMessageAttributes ("" for none): over the
// attributes sorted by name, each name, data type and value as a 4-byte
// big-endian length and its bytes, the value preceded by its transport type
// (1 string, 2 binary).
func attrsMD5(attrs map[string]attrValue) string {
	if len(attrs) == 0 {
		return ""
	}
	h := md5.New()
	field := func(b []byte) {
		_ = binary.Write(h, binary.BigEndian, uint32(len(b)))
		h.Write(b)
	}
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[name]
		field([]byte(name))
		field([]byte(v.DataType))
		if v.StringValue != nil {
			h.Write([]byte{1})
			field([]byte(*v.StringValue))
		} else {
			h.Write([]byte{2})
			field(v.BinaryValue)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// selectAttrs are the message attributes a receive asked for: "All" or
// ".*" for every one, "prefix.*" for those with the prefix, or names.
func selectAttrs(attrs map[string]attrValue, names []string) map[string]attrValue {
	out := map[string]attrValue{}
	for name, v := range attrs {
		for _, want := range names {
			prefix, wild := strings.CutSuffix(want, ".*")
			if want == "All" || want == ".*" || want == name || (wild && strings.HasPrefix(name, prefix+".")) {
				out[name] = v
				break
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

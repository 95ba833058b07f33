package keyname

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxKeyBytes is the longest key value kept as it is (in its line's item's
// sort key, the records that wait for it, the requests in its line); a
// longer one is kept as its SHA-256.
const MaxKeyBytes = 200

// ShortKey is what a key of value is kept, shown and logged by: the value,
// or for one longer than MaxKeyBytes, "sha256:" and its SHA-256 in hex, so
// that the records that wait for it (FlowWhy), an accepted call's record
// that holds its slot (its hk) and a request in its line stay small
// whatever the value. (A long value given as it is, as before the Agent
// kept keys short, is kept as its hash too, in an item of its own.)
func ShortKey(value string) string {
	if len(value) <= MaxKeyBytes {
		return value
	}
	sum := sha256.Sum256([]byte(value))
	return "sha256:" + hex.EncodeToString(sum[:])
}

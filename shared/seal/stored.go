package seal

// Covers reports whether stored, an order as the state store keeps it, is
// sealed: its data sealed itself, or the claim check of sealed data (with
// its data key in its head). What is made of such an order (its results,
// what its services answer) is its data too.
func Covers(stored []byte) bool {
	_, ok := blobOf(stored)
	return ok
}

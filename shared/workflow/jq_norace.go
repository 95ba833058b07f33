//go:build !race && !msan && !asan

package workflow

// jqAllocScale is jqAllocBound's multiple of MaxJQAllocBytes: one, in a
// production build.
const jqAllocScale = 1

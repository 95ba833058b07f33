//go:build !race

package workflow

// jqAllocScale is JQAllocBound's multiple of MaxJQAllocBytes: one, in a
// production build.
const jqAllocScale = 1

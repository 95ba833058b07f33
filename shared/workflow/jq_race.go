//go:build race

package workflow

// jqAllocScale is JQAllocBound's multiple of MaxJQAllocBytes: four, the
// bytes a rune takes, in a build the race detector instruments.
const jqAllocScale = 4

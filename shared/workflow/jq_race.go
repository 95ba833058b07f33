//go:build race || msan || asan

package workflow

// jqAllocScale is jqAllocBound's multiple of MaxJQAllocBytes in a build the
// compiler instruments: 256 MB, the production bound and room for three
// strings of 16 MB counted as runes (four bytes each).
const jqAllocScale = 4

// Package layout holds the repository's own checks, run by go test: the
// product never imports the local tooling under shared/devkit, and every
// relative link of the docs resolves.
package layout

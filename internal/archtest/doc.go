// Package archtest checks, in its tests, the import rules and the "the
// library never prints or exits" rule of docs/ARCHITECTURE.md over the
// module's packages as `go list` sees them, so that the rules, not a
// hand-kept table, are what the document states and the build enforces;
// and, the other way, that what the document states of the code (who
// imports each outside module, where the library panics, the functions
// that keep each invariant) is what the code is (docs_test.go).
//
// The package has no API; this file exists so that it is a package.
package archtest

// Package layering holds the test that keeps imports flowing one way:
// cmd -> server -> (domain packages, gates) -> store -> gen.
package layering

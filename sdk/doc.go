// Package sdk holds no Go code: it is where `go test ./...` runs the TypeScript
// (sdk/typescript, node:test) and Python (sdk/python, unittest) SDKs' suites against a
// control plane built from the tree, so that the README's single test command covers
// every language. See sdk_test.go.
package sdk

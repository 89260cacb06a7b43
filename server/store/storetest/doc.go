// Package storetest is the conformance suite of store.Store: every implementation runs
// Run against fresh instances and must pass all of it. The suite checks the contract
// written on the interface (atomicity, derived indexes, ordering, tenant isolation,
// gap-free logs, group-commit isolation of failures, errors), not an implementation's
// internals. SmallDisk and FillDisk give disk-full tests a real, small file system.
package storetest

// Package schema owns the on-disk layout of the agentplane store: every bucket name,
// every key encoding and the schema version. Nothing else in the tree spells a bucket
// or builds a key by hand, so a layout change is a change to this package plus a
// version bump.
//
// Keys are ordered byte strings built from components:
//
//   - a string component is one length byte followed by the bytes (at most
//     MaxComponent), so a component never prefixes another one;
//   - a number or a time is 8 bytes big-endian (times as Unix nanoseconds, clamped at
//     zero), so byte order is numeric order.
//
// The tenant is the first component of every key, so a tenant's data is one contiguous
// range and another tenant's keys cannot be reached by a range scan over it. Within a
// tenant, the key lists the components a listing is ordered by, so listing and paging
// are range scans: tasks newest first (inverted creation time), events and verdicts by
// sequence, obligations by ordinal, the run queue, lease deadlines, retention and the
// pending interrupt inbox by time, oldest first.
package schema

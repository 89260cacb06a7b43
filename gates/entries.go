package gates

import (
	"fmt"
	"slices"
	"strings"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Bounds on caller entries. A real declaration names a handful of servers; the bounds
// stop a request from making the control plane or a runtime hold or send much more.
const (
	// MaxCallerPeers is how many entries of one caller list are considered; entries
	// past it are dropped as DropOverLimit without being inspected.
	MaxCallerPeers = 32
	// MaxNameBytes bounds an entry name (a tool-name segment).
	MaxNameBytes = 64
	// MaxHeaders bounds the headers of one entry.
	MaxHeaders = 16
	// MaxHeaderNameBytes bounds one header name.
	MaxHeaderNameBytes = 128
	// MaxHeaderValueBytes bounds one header value.
	MaxHeaderValueBytes = 4096
	// MaxHeaderBytes bounds the names and values of one entry's headers together.
	MaxHeaderBytes = 8192
	// maxNamedOverLimit is how many over-limit entries are named one by one in a
	// report; the rest are summarised as one "#i..#j" entry so reports stay bounded.
	maxNamedOverLimit = MaxCallerPeers
)

// Reason is a stable, machine-readable reason an entry was dropped. Tests and clients
// match on it; it is written as DroppedEntry.reason.
type Reason string

// Drop reasons.
const (
	DropNameInvalid      Reason = "name.invalid"          // empty, too long, or not a usable tool-name segment
	DropNameDuplicate    Reason = "name.duplicate"        // same name (case-insensitively) as an earlier entry
	DropShadowsBaseline  Reason = "name.shadows_baseline" // same name as a deployment baseline entry
	DropURLInvalid       Reason = "url.invalid"           // not an absolute http(s) URL with a well-formed host
	DropURLScheme        Reason = "url.scheme"            // a scheme other than https/http (file:, gopher:, ...)
	DropURLPlainHTTP     Reason = "url.plain_http"        // http other than to loopback in single-user mode
	DropURLCredentials   Reason = "url.credentials"       // userinfo in the URL; credentials belong in headers
	DropURLForbiddenHost Reason = "url.forbidden_host"    // link-local, metadata, unspecified, multicast, reserved, numeric
	DropURLPrivateHost   Reason = "url.private_host"      // loopback, private or internal host in multi-tenant mode
	DropHeadersTooMany   Reason = "headers.too_many"      // more than MaxHeaders
	DropHeadersTooLarge  Reason = "headers.too_large"     // a name, a value or the total over its bound
	DropHeaderInvalid    Reason = "headers.invalid"       // not an HTTP token name, or control characters in a value
	DropHeaderReserved   Reason = "headers.reserved"      // a header the transport owns (Host, Content-Length, ...)
	DropOverLimit        Reason = "over_limit"            // past MaxCallerPeers
)

// DropReasons is every Drop* reason: the closed set the comment on
// DroppedEntry.reason in task.proto lists (a test keeps them equal).
var DropReasons = []Reason{DropNameInvalid, DropNameDuplicate, DropShadowsBaseline, DropURLInvalid, DropURLScheme,
	DropURLPlainHTTP, DropURLCredentials, DropURLForbiddenHost, DropURLPrivateHost, DropHeadersTooMany,
	DropHeadersTooLarge, DropHeaderInvalid, DropHeaderReserved, DropOverLimit}

// Entry is a caller or baseline entry: an MCP server or an A2A peer. Both are a name
// (a tool-name segment), a URL and headers, and every shape rule applies to both.
type Entry interface {
	*agentplanev1.McpServer | *agentplanev1.A2APeer
	GetName() string
	GetUrl() string
	GetHeaders() map[string]string
}

// ValidName reports whether name can be an entry name: 1..MaxNameBytes of ASCII
// letters, digits, '_' and '-', starting and ending with a letter or digit, with no
// "__". The last rule keeps A2A tool names (a2a__<peer>__<skill>) unambiguous; MCP
// server names follow the same rule so that a name means the same on both lanes.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxNameBytes || strings.Contains(name, "__") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && ((c != '_' && c != '-') || i == 0 || i == len(name)-1) {
			return false
		}
	}
	return true
}

// nameKey folds a name for clash detection: "GitHub" and "github" are the same entry
// to a reader of tool names, so a caller may not hold both nor shadow one with the other.
func nameKey(name string) string { return strings.ToLower(name) }

// label names entry i of a list in a report: its name when that is valid (so reports
// never echo arbitrary caller bytes), "#i" otherwise.
func label[E Entry](e E, i int) string {
	if e != nil && ValidName(e.GetName()) {
		return e.GetName()
	}
	return fmt.Sprintf("#%d", i)
}

// ValidateEntries shape-checks a caller's list for mode m: the first MaxCallerPeers
// entries are checked (name, duplicates, URL per CheckURL, headers) and the rest are
// dropped as over the limit. It returns the entries kept, in order, and one
// DroppedEntry per dropped entry (named by label; at most MaxCallerPeers named
// over-limit drops, the remainder summarised as "#i..#j").
func ValidateEntries[E Entry](m Mode, entries []E) (kept []E, dropped []*agentplanev1.DroppedEntry) {
	rules := callerRules(m)
	seen := map[string]bool{}
	for i, e := range entries {
		if i >= MaxCallerPeers {
			dropped = append(dropped, overLimit(entries, i)...)
			break
		}
		why, ok := checkEntry(e, rules)
		if ok && seen[nameKey(e.GetName())] {
			why, ok = DropNameDuplicate, false
		}
		if !ok {
			dropped = append(dropped, drop(label(e, i), why))
			continue
		}
		seen[nameKey(e.GetName())] = true
		kept = append(kept, e)
	}
	return kept, dropped
}

// overLimit reports entries[from:] as DropOverLimit, bounded.
func overLimit[E Entry](entries []E, from int) []*agentplanev1.DroppedEntry {
	var out []*agentplanev1.DroppedEntry
	for i := from; i < len(entries); i++ {
		if i-from == maxNamedOverLimit && i < len(entries)-1 {
			return append(out, drop(fmt.Sprintf("#%d..#%d", i, len(entries)-1), DropOverLimit))
		}
		out = append(out, drop(label(entries[i], i), DropOverLimit))
	}
	return out
}

func drop(name string, why Reason) *agentplanev1.DroppedEntry {
	return &agentplanev1.DroppedEntry{Name: name, Reason: string(why)}
}

// checkEntry applies the per-entry rules (all but duplicates and the count).
func checkEntry[E Entry](e E, r urlRules) (Reason, bool) {
	if e == nil || !ValidName(e.GetName()) {
		return DropNameInvalid, false
	}
	if why, ok := checkURL(e.GetUrl(), r); !ok {
		return why, false
	}
	return checkHeaders(e.GetHeaders())
}

// reservedHeaders are owned by the HTTP transport or by a proxy; a caller setting them
// could smuggle requests or redirect a virtual host.
var reservedHeaders = map[string]bool{
	"host": true, "connection": true, "content-length": true, "transfer-encoding": true,
	"upgrade": true, "te": true, "trailer": true, "keep-alive": true, "expect": true,
	"proxy-connection": true, "proxy-authorization": true, "proxy-authenticate": true,
}

func checkHeaders(h map[string]string) (Reason, bool) {
	if len(h) > MaxHeaders {
		return DropHeadersTooMany, false
	}
	// Sorted so that an entry with several problems always reports the same one.
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	total := 0
	for _, k := range names {
		v := h[k]
		total += len(k) + len(v)
		switch {
		case len(k) > MaxHeaderNameBytes || len(v) > MaxHeaderValueBytes || total > MaxHeaderBytes:
			return DropHeadersTooLarge, false
		case !httpToken(k) || !headerValue(v):
			return DropHeaderInvalid, false
		case reservedHeaders[strings.ToLower(k)] || strings.HasPrefix(strings.ToLower(k), "proxy-"):
			return DropHeaderReserved, false
		}
	}
	return "", true
}

// httpToken reports whether s is an RFC 9110 token (a valid field name).
func httpToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// headerValue reports whether s has no control characters other than tab (so no CR
// or LF to split a request, no NUL).
func headerValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// Merge puts gated caller entries after the deployment baseline. The baseline wins a
// name clash (case-insensitively): a caller can add an entry, never shadow one, since
// the name is the tool-name segment and shadowing would keep the tool names the model
// knows while swapping what answers them. Each shadowing attempt is returned as a
// DropShadowsBaseline drop. gated is expected to come from ValidateEntries. The
// result is a new slice; neither input is modified.
func Merge[E Entry](baseline, gated []E) (merged []E, dropped []*agentplanev1.DroppedEntry) {
	if len(baseline)+len(gated) == 0 {
		return nil, nil
	}
	merged = make([]E, 0, len(baseline)+len(gated))
	merged = append(merged, baseline...)
	taken := make(map[string]bool, len(baseline))
	for _, b := range baseline {
		taken[nameKey(b.GetName())] = true
	}
	for i, g := range gated {
		if taken[nameKey(g.GetName())] {
			dropped = append(dropped, drop(label(g, i), DropShadowsBaseline))
			continue
		}
		taken[nameKey(g.GetName())] = true
		merged = append(merged, g)
	}
	return merged, dropped
}

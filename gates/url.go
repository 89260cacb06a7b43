package gates

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxURLBytes bounds the length of a peer URL.
const MaxURLBytes = 2048

// hostClass is what a URL's host is, for deciding who may reach it.
type hostClass uint8

const (
	hostPublic    hostClass = iota
	hostPrivate             // RFC 1918, ULA, CGNAT, documentation ranges, single-label and site-internal names
	hostLoopback            // 127/8, ::1, localhost
	hostForbidden           // never reachable through a gate: link-local, metadata, unspecified, multicast, ambiguous numerics
	hostInvalid             // not a well-formed IP literal or DNS name
)

// urlRules are the reachability rules of one kind of entry.
type urlRules struct {
	privateOK   bool // private ranges and internal names
	loopbackOK  bool
	plainHTTPOK func(hostClass) bool
}

// callerRules is what a caller's entry may point at in mode m: https to public hosts
// always; private and loopback hosts, and plain http to loopback, only in single-user
// mode, where the caller owns the runtime that makes the request.
func callerRules(m Mode) urlRules {
	single := m == SingleUser
	return urlRules{
		privateOK:   single,
		loopbackOK:  single,
		plainHTTPOK: func(c hostClass) bool { return single && c == hostLoopback },
	}
}

// operatorRules is what a baseline entry from config may point at: the operator vets
// its own network, so private hosts and plain http are allowed; the always-forbidden
// addresses are not (no legitimate peer lives at the metadata endpoint).
var operatorRules = urlRules{privateOK: true, loopbackOK: true, plainHTTPOK: func(hostClass) bool { return true }}

// CheckURL decides whether a caller entry may point at raw in mode m, and if not,
// why. Accepted URLs are absolute http(s) URLs without userinfo whose host is a
// canonical IP literal or a DNS name; plain http only to loopback in single-user
// mode; never link-local (169.254.0.0/16, fe80::/10, so never the cloud metadata
// endpoint), unspecified, multicast or reserved addresses, nor numeric host spellings
// that some resolvers read as IPv4 (2852039166, 0xA9FEA9FE, 0251.0376.0251.0376); in
// multi-tenant mode never loopback, private or internal hosts either.
//
// The check is on the URL text: a DNS name can still resolve to a forbidden address
// (DNS rebinding), so whatever dials the URL must check the address it connects to.
func CheckURL(raw string, m Mode) (Reason, bool) {
	return checkURL(raw, callerRules(m))
}

func checkURL(raw string, r urlRules) (Reason, bool) {
	if raw == "" || len(raw) > MaxURLBytes {
		return DropURLInvalid, false
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c == 0x7f || c == '\\' {
			// Spaces, controls and backslashes are read differently by different URL
			// parsers (WHATWG treats '\' as '/'); refuse the ambiguity outright.
			return DropURLInvalid, false
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return DropURLInvalid, false
	}
	switch u.Scheme {
	case "https", "http":
	case "":
		return DropURLInvalid, false
	default:
		return DropURLScheme, false
	}
	if u.Opaque != "" || u.Host == "" {
		return DropURLInvalid, false
	}
	if u.User != nil {
		return DropURLCredentials, false
	}
	bracketed := strings.HasPrefix(u.Host, "[")
	if strings.HasSuffix(u.Host, ":") || (!bracketed && strings.Contains(authority(raw), "%")) {
		// url.Parse decodes %-escapes in a host; other parsers do not, so an escaped
		// host would be judged here as one address and dialled elsewhere as another.
		return DropURLInvalid, false
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || p[0] == '0' {
			return DropURLInvalid, false
		}
	}
	class := classifyHost(u.Hostname(), bracketed)
	if reason, ok := r.reach(class); !ok {
		return reason, false
	}
	if u.Scheme == "http" && !r.plainHTTPOK(class) {
		return DropURLPlainHTTP, false
	}
	return "", true
}

// reach decides whether the rules let an entry reach a host of class c.
func (r urlRules) reach(c hostClass) (Reason, bool) {
	switch c {
	case hostInvalid:
		return DropURLInvalid, false
	case hostForbidden:
		return DropURLForbiddenHost, false
	case hostLoopback:
		if !r.loopbackOK {
			return DropURLPrivateHost, false
		}
	case hostPrivate:
		if !r.privateOK {
			return DropURLPrivateHost, false
		}
	}
	return "", true
}

// authority returns the raw authority of an absolute URL (between "//" and the path).
func authority(raw string) string {
	i := strings.Index(raw, "//")
	if i < 0 {
		return ""
	}
	a := raw[i+2:]
	if j := strings.IndexAny(a, "/?#"); j >= 0 {
		a = a[:j]
	}
	return a
}

// metadataHosts are cloud instance-metadata names; their addresses are covered by
// the address rules, these cover resolvers that know them by name.
var metadataHosts = map[string]bool{
	"metadata":                   true,
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
}

// internalSuffixes are name suffixes that only resolve inside a site.
var internalSuffixes = []string{".internal", ".local", ".localdomain", ".home.arpa", ".lan", ".corp", ".intranet"}

func classifyHost(host string, bracketed bool) hostClass {
	if bracketed {
		// url.Parse only accepts IPv6 literals in brackets; anything else is malformed.
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return hostInvalid
		}
		return classifyAddr(a)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is6() {
			return hostInvalid // an IPv6 literal must be bracketed
		}
		return classifyAddr(a)
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if !validDNSName(name) {
		return hostInvalid
	}
	labels := strings.Split(name, ".")
	if numericLabel(labels[len(labels)-1]) {
		// inet_aton spellings (127.1, 2130706433, 0x7f.1, 0177.0.0.1): getaddrinfo
		// reads them as IPv4 addresses, so they are addresses we cannot classify by text.
		return hostForbidden
	}
	switch {
	case metadataHosts[name]:
		return hostForbidden
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return hostLoopback
	case len(labels) == 1:
		return hostPrivate // resolved through search domains: an internal host
	}
	for _, s := range internalSuffixes {
		if strings.HasSuffix(name, s) {
			return hostPrivate
		}
	}
	return hostPublic
}

// validDNSName accepts lower-case LDH names (underscores allowed, as in practice), at
// most 253 bytes, labels of 1..63 bytes not starting or ending with '-'.
func validDNSName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// numericLabel reports whether l is all decimal digits or a 0x hex literal.
func numericLabel(l string) bool {
	if strings.HasPrefix(l, "0x") {
		l = l[2:]
		for i := 0; i < len(l); i++ {
			if !strings.ContainsRune("0123456789abcdef", rune(l[i])) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

var (
	pfxThisNet     = netip.MustParsePrefix("0.0.0.0/8")
	pfxReserved4   = netip.MustParsePrefix("240.0.0.0/4") // includes 255.255.255.255
	pfxIPv4Compat  = netip.MustParsePrefix("::/96")       // deprecated IPv4-compatible IPv6
	pfxNAT64       = netip.MustParsePrefix("64:ff9b::/96")
	pfx6to4        = netip.MustParsePrefix("2002::/16")
	pfxTeredo      = netip.MustParsePrefix("2001::/32")
	metadataAddrs  = []netip.Addr{netip.MustParseAddr("100.100.100.200"), netip.MustParseAddr("fd00:ec2::254")}
	privatePrefixs = []netip.Prefix{
		netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
		netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
		netip.MustParsePrefix("192.0.2.0/24"),    // documentation
		netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
		netip.MustParsePrefix("198.51.100.0/24"), // documentation
		netip.MustParsePrefix("203.0.113.0/24"),  // documentation
		netip.MustParsePrefix("2001:db8::/32"),   // documentation
		netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
		netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	}
)

func classifyAddr(a netip.Addr) hostClass {
	a = a.WithZone("").Unmap()
	if a.Is6() {
		switch {
		case a.IsUnspecified():
			return hostForbidden
		case a.IsLoopback():
			return hostLoopback
		case pfxNAT64.Contains(a):
			// The translator forwards to the embedded IPv4 address; judge that one.
			b := a.As16()
			return classifyAddr(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case pfx6to4.Contains(a):
			b := a.As16()
			if c := classifyAddr(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})); c != hostPublic {
				return c
			}
		case pfxIPv4Compat.Contains(a), pfxTeredo.Contains(a):
			return hostForbidden
		}
	}
	for _, m := range metadataAddrs {
		if a == m {
			return hostForbidden
		}
	}
	switch {
	case a.IsUnspecified(), pfxThisNet.Contains(a), pfxReserved4.Contains(a),
		a.IsLinkLocalUnicast(), a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return hostForbidden
	case a.IsLoopback():
		return hostLoopback
	case a.IsPrivate():
		return hostPrivate
	}
	for _, p := range privatePrefixs {
		if p.Contains(a) {
			return hostPrivate
		}
	}
	return hostPublic
}

// destinationRules is what a destination the control plane itself dials (a webhook)
// may point at: the caller rules of a multi-tenant deployment (https to public hosts),
// or, when the deployment allows private destinations, the operator's rules (private
// and loopback hosts, plain http). Never the always-forbidden addresses.
func destinationRules(allowPrivate bool) urlRules {
	if allowPrivate {
		return operatorRules
	}
	return callerRules(MultiTenant)
}

// CheckDestinationURL decides whether the control plane may send to raw (a webhook
// endpoint), with the same rules as a caller's entry in a multi-tenant deployment
// unless allowPrivate (the deployment's switch) lets it reach private, loopback and
// plain-http destinations. Like CheckURL it judges the text: the dialer must also
// check each address it connects to (CheckDestinationAddr).
func CheckDestinationURL(raw string, allowPrivate bool) (Reason, bool) {
	return checkURL(raw, destinationRules(allowPrivate))
}

// CheckDestinationAddr decides whether the control plane may connect to a, an address
// a destination's name resolved to: the dial-time half of CheckDestinationURL, which
// stops a name that resolves to a private or metadata address (DNS rebinding).
func CheckDestinationAddr(a netip.Addr, allowPrivate bool) (Reason, bool) {
	return destinationRules(allowPrivate).reach(classifyAddr(a))
}

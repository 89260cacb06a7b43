package gates

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	const ok Reason = ""
	tests := []struct {
		url          string
		single, mult Reason // expected outcome per mode ("" = accepted)
	}{
		// Accepted.
		{"https://mcp.example.com/sse", ok, ok},
		{"https://mcp.example.com:8443/v1?x=1#f", ok, ok},
		{"HTTPS://MCP.Example.COM/", ok, ok},
		{"https://8.8.8.8/", ok, ok},
		{"https://[2606:4700::1111]/", ok, ok},
		{"https://example.com./", ok, ok},
		// Plain http: loopback in single-user only.
		{"http://example.com/", DropURLPlainHTTP, DropURLPlainHTTP},
		{"http://8.8.8.8/", DropURLPlainHTTP, DropURLPlainHTTP},
		{"http://127.0.0.1:8080/mcp", ok, DropURLPrivateHost},
		{"http://localhost:3000/", ok, DropURLPrivateHost},
		{"http://[::1]/", ok, DropURLPrivateHost},
		{"http://10.0.0.5/", DropURLPlainHTTP, DropURLPrivateHost},
		// Loopback, private and internal hosts: single-user only.
		{"https://127.0.0.1/", ok, DropURLPrivateHost},
		{"https://api.localhost/", ok, DropURLPrivateHost},
		{"https://10.1.2.3/", ok, DropURLPrivateHost},
		{"https://192.168.1.10/", ok, DropURLPrivateHost},
		{"https://172.16.0.1/", ok, DropURLPrivateHost},
		{"https://100.64.0.1/", ok, DropURLPrivateHost},
		{"https://[fd12:3456::1]/", ok, DropURLPrivateHost},
		{"https://[::ffff:10.0.0.1]/", ok, DropURLPrivateHost},
		{"https://[64:ff9b::a00:1]/", ok, DropURLPrivateHost},
		{"https://intranet/", ok, DropURLPrivateHost},
		{"https://db.corp.internal/", ok, DropURLPrivateHost},
		{"https://printer.local/", ok, DropURLPrivateHost},
		// Link-local and cloud metadata: never.
		{"http://169.254.169.254/latest/meta-data/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://169.254.169.254/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://169.254.1.1/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://[fe80::1]/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://[fe80::1%25eth0]/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://[::ffff:169.254.169.254]/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://[64:ff9b::a9fe:a9fe]/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://[2002:a9fe:a9fe::1]/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://[fd00:ec2::254]/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://100.100.100.200/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://metadata.google.internal/computeMetadata/v1/", DropURLForbiddenHost, DropURLForbiddenHost},
		// Numeric spellings resolvers read as addresses.
		{"https://2852039166/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://0xA9FEA9FE/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://0251.0376.0251.0376/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://127.1/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://169.254.169.254./", DropURLForbiddenHost, DropURLForbiddenHost},
		// Unspecified, this-network, multicast, broadcast, reserved, IPv4-compatible.
		{"https://0.0.0.0/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"http://0.0.0.0:8080/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://0.1.2.3/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://[::]/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://224.0.0.1/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://[ff02::1]/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://255.255.255.255/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://240.0.0.1/", DropURLForbiddenHost, DropURLForbiddenHost},
		{"https://[::a9fe:a9fe]/", DropURLForbiddenHost, DropURLForbiddenHost},
		// Credentials in the URL.
		{"https://user:pass@example.com/", DropURLCredentials, DropURLCredentials},
		{"https://token@example.com/", DropURLCredentials, DropURLCredentials},
		{"https://@example.com/", DropURLCredentials, DropURLCredentials},
		// Other schemes.
		{"file:///etc/passwd", DropURLScheme, DropURLScheme},
		{"gopher://example.com:70/_x", DropURLScheme, DropURLScheme},
		{"ftp://example.com/", DropURLScheme, DropURLScheme},
		{"ws://example.com/", DropURLScheme, DropURLScheme},
		{"javascript:alert(1)", DropURLScheme, DropURLScheme},
		{"data:text/plain,x", DropURLScheme, DropURLScheme},
		// Malformed.
		{"", DropURLInvalid, DropURLInvalid},
		{"example.com", DropURLInvalid, DropURLInvalid},
		{"//example.com/", DropURLInvalid, DropURLInvalid},
		{"https:example.com", DropURLInvalid, DropURLInvalid},
		{"https:///path", DropURLInvalid, DropURLInvalid},
		{"https://exa mple.com/", DropURLInvalid, DropURLInvalid},
		{"https://example.com\\@169.254.169.254/", DropURLInvalid, DropURLInvalid},
		{"https://example.com:/", DropURLInvalid, DropURLInvalid},
		{"https://example.com:0/", DropURLInvalid, DropURLInvalid},
		{"https://example.com:65536/", DropURLInvalid, DropURLInvalid},
		{"https://example.com:080/", DropURLInvalid, DropURLInvalid},
		{"https://%31%32%37.0.0.1/", DropURLInvalid, DropURLInvalid},
		{"https://exämple.com/", DropURLInvalid, DropURLInvalid},
		{"https://-bad.example.com/", DropURLInvalid, DropURLInvalid},
		{"https://[not-an-ip]/", DropURLInvalid, DropURLInvalid},
		{"https://[1.2.3.4]/", DropURLInvalid, DropURLInvalid},
		{"https://example.com/" + strings.Repeat("a", MaxURLBytes), DropURLInvalid, DropURLInvalid},
	}
	for _, tt := range tests {
		for _, m := range []Mode{SingleUser, MultiTenant} {
			want := tt.single
			if m == MultiTenant {
				want = tt.mult
			}
			name := tt.url
			if len(name) > 60 {
				name = name[:60]
			}
			t.Run(m.String()+"/"+name, func(t *testing.T) {
				got, accepted := CheckURL(tt.url, m)
				if accepted != (want == "") || got != want {
					t.Fatalf("CheckURL(%q, %s) = %q, %v; want %q", tt.url, m, got, accepted, want)
				}
			})
		}
	}
}

// FuzzCheckURL checks properties that must hold for any input: no panic; a reason
// exactly when refused; multi-tenant acceptance implies single-user acceptance, which
// implies operator acceptance; and an accepted URL, re-read with a different parser
// (net.ParseIP), has an absolute http(s) form, no userinfo, and no host address that
// the mode forbids.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/", "http://127.0.0.1:8080/", "https://[fe80::1%25eth0]/",
		"https://169.254.169.254/", "file:///etc/passwd", "https://user:pass@host/",
		"https://0xA9FEA9FE/", "https://[::ffff:127.0.0.1]/", "gopher://x", "http://0.0.0.0/",
		"https://[64:ff9b::a9fe:a9fe]/", "https://%31%32%37.0.0.1/", "https://a.b.c.localhost./",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		single, okSingle := CheckURL(raw, SingleUser)
		multi, okMulti := CheckURL(raw, MultiTenant)
		_, okOperator := checkURL(raw, operatorRules)
		if okSingle != (single == "") || okMulti != (multi == "") {
			t.Fatalf("reason and verdict disagree: %q %v / %q %v", single, okSingle, multi, okMulti)
		}
		if okMulti && !okSingle || okSingle && !okOperator {
			t.Fatalf("%q: acceptance not monotonic (multi=%v single=%v operator=%v)", raw, okMulti, okSingle, okOperator)
		}
		if !okSingle {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || u.User != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
			t.Fatalf("%q accepted but parses as %#v (%v)", raw, u, err)
		}
		host := u.Hostname()
		if i := strings.IndexByte(host, '%'); i >= 0 {
			host = host[:i]
		}
		ip := net.ParseIP(host)
		if ip != nil && (ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast() || ip.IsLinkLocalMulticast()) {
			t.Fatalf("%q accepted with forbidden address %s", raw, ip)
		}
		if !okMulti {
			return
		}
		if u.Scheme != "https" {
			t.Fatalf("%q accepted in multi-tenant mode over plain http", raw)
		}
		if ip != nil && (ip.IsLoopback() || ip.IsPrivate()) || strings.EqualFold(host, "localhost") {
			t.Fatalf("%q accepted in multi-tenant mode with private address %s", raw, host)
		}
	})
}

func TestCheckDestination(t *testing.T) {
	for _, tc := range []struct {
		url          string
		allowPrivate bool
		want         Reason
	}{
		{"https://hooks.slack.com/services/T/B/X", false, ""},
		{"http://hooks.example.com/x", false, DropURLPlainHTTP},
		{"https://10.0.0.5/hook", false, DropURLPrivateHost},
		{"https://10.0.0.5/hook", true, ""},
		{"http://127.0.0.1:8080/hook", false, DropURLPrivateHost},
		{"http://127.0.0.1:8080/hook", true, ""},
		{"http://169.254.169.254/latest", true, DropURLForbiddenHost},
		{"https://metadata.google.internal/", true, DropURLForbiddenHost},
		{"https://user:pw@example.com/", true, DropURLCredentials},
		{"ftp://example.com/", true, DropURLScheme},
	} {
		got, ok := CheckDestinationURL(tc.url, tc.allowPrivate)
		if got != tc.want || ok != (tc.want == "") {
			t.Errorf("CheckDestinationURL(%q, %v) = %q, %v; want %q", tc.url, tc.allowPrivate, got, ok, tc.want)
		}
	}
	for _, tc := range []struct {
		addr         string
		allowPrivate bool
		want         Reason
	}{
		{"93.184.216.34", false, ""},
		{"127.0.0.1", false, DropURLPrivateHost},
		{"127.0.0.1", true, ""},
		{"192.168.1.1", false, DropURLPrivateHost},
		{"169.254.169.254", true, DropURLForbiddenHost},
		{"::ffff:169.254.169.254", true, DropURLForbiddenHost},
		{"fd00:ec2::254", true, DropURLForbiddenHost},
	} {
		got, ok := CheckDestinationAddr(netip.MustParseAddr(tc.addr), tc.allowPrivate)
		if got != tc.want || ok != (tc.want == "") {
			t.Errorf("CheckDestinationAddr(%s, %v) = %q, %v; want %q", tc.addr, tc.allowPrivate, got, ok, tc.want)
		}
	}
}

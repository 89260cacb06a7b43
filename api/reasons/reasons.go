// Package reasons reads the error reasons the agentplane API declares
// (agentplane.v1.ErrorReason in proto/agentplane/v1/errors.proto): each reason's wire
// string, status codes and retry class, and the reason and retry advice of a status
// error. The server builds its errors with it and the Go client reads them with it; it
// depends on gen only.
package reasons

//go:generate sh -c "cd ../.. && go tool -modfile=tools/buf/go.mod buf build proto -o - | go run ./tools/errdoc docs/errors.md"

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Reason is a declared error reason.
type Reason = agentplanev1.ErrorReason

// Domain is the ErrorInfo domain of every agentplane error (a domain name the project
// owns, as google.rpc.ErrorInfo asks).
const Domain = "agentplane.dev"

// RetryDelay is the retry_delay of the RetryInfo detail a retryable error carries: the
// least wait before the first retry.
const RetryDelay = time.Second

type declared struct {
	wire      string
	codes     []codes.Code
	retryable bool
}

var (
	byReason = map[Reason]declared{}
	byWire   = map[string]Reason{}
	all      []Reason
)

func init() {
	values := agentplanev1.ErrorReason_ERROR_REASON_UNSPECIFIED.Descriptor().Values()
	for i := range values.Len() {
		v := values.Get(i)
		r := Reason(v.Number())
		if r == agentplanev1.ErrorReason_ERROR_REASON_UNSPECIFIED {
			continue
		}
		opts, _ := proto.GetExtension(v.Options(), agentplanev1.E_ErrorReason).(*agentplanev1.ErrorReasonOptions)
		d := declared{wire: opts.GetWire(), retryable: opts.GetRetryable()}
		if d.wire == "" {
			panic(fmt.Sprintf("reasons: %s declares no wire string", v.Name()))
		}
		if _, dup := byWire[d.wire]; dup {
			panic(fmt.Sprintf("reasons: wire string %q declared twice", d.wire))
		}
		for _, name := range opts.GetCodes() {
			var c codes.Code
			if err := c.UnmarshalJSON([]byte(`"` + name + `"`)); err != nil || c == codes.OK {
				panic(fmt.Sprintf("reasons: %s declares code %q", v.Name(), name))
			}
			d.codes = append(d.codes, c)
		}
		if len(d.codes) == 0 {
			panic(fmt.Sprintf("reasons: %s declares no code", v.Name()))
		}
		byReason[r], byWire[d.wire] = d, r
		all = append(all, r)
	}
}

// All returns every declared reason, in declaration order.
func All() []Reason { return append([]Reason(nil), all...) }

// Wire returns the string r is sent as (ErrorInfo.reason), or "" for an undeclared r.
func Wire(r Reason) string { return byReason[r].wire }

// Parse returns the reason sent as wire, or ERROR_REASON_UNSPECIFIED when this build
// does not declare it (a newer server may send reasons an older client does not know).
func Parse(wire string) Reason { return byWire[wire] }

// Codes returns the status codes r is declared with.
func Codes(r Reason) []codes.Code { return append([]codes.Code(nil), byReason[r].codes...) }

// Retryable reports whether a call refused with r may succeed later unchanged.
func Retryable(r Reason) bool { return byReason[r].retryable }

// Status is the status of an error with reason r: code c, message msg, an ErrorInfo
// (domain, r's wire string, metadata), a RetryInfo when r is retryable, then details.
// It panics on an undeclared r: a reason the API does not declare never reaches a
// client.
func Status(c codes.Code, r Reason, msg string, metadata map[string]string, details ...proto.Message) *status.Status {
	d, ok := byReason[r]
	if !ok {
		panic(fmt.Sprintf("reasons: undeclared reason %v", r))
	}
	ds := []protoadapt.MessageV1{&errdetails.ErrorInfo{Domain: Domain, Reason: d.wire, Metadata: metadata}}
	if d.retryable && !hasRetryInfo(details) {
		ds = append(ds, &errdetails.RetryInfo{RetryDelay: durationpb.New(RetryDelay)})
	}
	for _, x := range details {
		ds = append(ds, protoadapt.MessageV1Of(x))
	}
	st := status.New(c, msg)
	if withDetails, err := st.WithDetails(ds...); err == nil {
		st = withDetails
	}
	return st
}

// hasRetryInfo reports whether details carry their own RetryInfo (a delay the
// server knows better than RetryDelay, such as a rate limit's next token), which then
// replaces the default one.
func hasRetryInfo(details []proto.Message) bool {
	for _, x := range details {
		if _, ok := x.(*errdetails.RetryInfo); ok {
			return true
		}
	}
	return false
}

// Info returns the agentplane ErrorInfo of a status error, or nil.
func Info(err error) *errdetails.ErrorInfo {
	for _, d := range detailsOf(err) {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			return info
		}
	}
	return nil
}

// Of returns the declared reason of a status error, or ERROR_REASON_UNSPECIFIED when it
// has no agentplane ErrorInfo or a reason this build does not declare.
func Of(err error) Reason { return Parse(Info(err).GetReason()) }

// RetryAfter reports whether the server says err's call may be repeated unchanged
// (a google.rpc.RetryInfo detail) and the least wait before doing so.
func RetryAfter(err error) (time.Duration, bool) {
	for _, d := range detailsOf(err) {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

func detailsOf(err error) []any {
	var se interface{ GRPCStatus() *status.Status }
	if err == nil || !errors.As(err, &se) {
		return nil
	}
	return se.GRPCStatus().Details()
}

package hitl

import "context"

// Channel is where a decision on an interrupt was made: the API, ctl, the console, a
// Slack button, a signed link or an email. It is recorded with the decision (audit)
// and is not a permission: the principal decides what a decision may do.
type Channel string

// The channels a decision can come through.
const (
	ChannelAPI     Channel = "api"
	ChannelCtl     Channel = "ctl"
	ChannelConsole Channel = "console"
	ChannelSlack   Channel = "slack"
	ChannelLink    Channel = "link"
	ChannelEmail   Channel = "email"
	// ChannelSystem is the server's own decisions (a deadline's default) and
	// escalation steps; no caller can claim it.
	ChannelSystem Channel = "system"
)

// ParseClientChannel is the channel a caller of the API says it is, from the
// x-agentplane-channel request header: ctl or console; anything else is the API.
// The header is a label for the audit, not a permission; the channels that decide
// in process (Slack, links, email) set theirs with WithChannel, and no header can
// claim them.
func ParseClientChannel(v string) Channel {
	switch Channel(v) {
	case ChannelCtl, ChannelConsole:
		return Channel(v)
	}
	return ChannelAPI
}

// ChannelHeader is the request header (gRPC metadata) ParseClientChannel reads.
const ChannelHeader = "x-agentplane-channel"

type channelKey struct{}

type linkIDKey struct{}

// WithLinkID returns ctx carrying the id of the signed link a decision made under it
// comes through (the audit record names it).
func WithLinkID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, linkIDKey{}, id)
}

// LinkIDFrom returns the link id ctx carries, "" when none.
func LinkIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(linkIDKey{}).(string)
	return id
}

// WithChannel returns ctx carrying the channel a decision made under it comes from.
func WithChannel(ctx context.Context, ch Channel) context.Context {
	return context.WithValue(ctx, channelKey{}, ch)
}

// ChannelFrom returns the channel ctx carries, ChannelAPI when none.
func ChannelFrom(ctx context.Context) Channel {
	if ch, ok := ctx.Value(channelKey{}).(Channel); ok && ch != "" {
		return ch
	}
	return ChannelAPI
}

package webhooks

import (
	"context"
	"net/http"
	"strconv"

	"github.com/agentplane/agentplane/gates"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/version"
)

// A2A push notifications (docs/a2a.md): a task's push configs are its own webhook
// endpoints. Every change of the task's state is written to the outbox in the
// transaction of the change, one notification per config, and delivered like every
// webhook (at least once, retried with backoff, then a dead letter), to a URL that
// passes the destination rules when it is set and again for every address dialled.

// EventA2ATaskUpdate is the event type of an A2A push notification in the outbox.
const EventA2ATaskUpdate = "a2a.task_update"

// HeaderA2AToken carries the push config's token (A2A 0.3's convention; 1.0 leaves
// the receiver's check to the config's authentication, which is sent too).
const HeaderA2AToken = "X-A2A-Notification-Token"

// enqueueA2A writes one notification per push config of rec (through enqueueTo: the
// body is built only when the tenant's outbox has room).
func (s *Service) enqueueA2A(w store.Writer, rec *storagev1.TaskRecord) error {
	now := s.now()
	for _, pc := range rec.GetA2APushConfigs() {
		to := &storagev1.OutboxRecord{Tenant: rec.GetTenant(), Endpoint: config.A2APushEndpoint, EventType: EventA2ATaskUpdate, A2APush: pc}
		if err := s.enqueueTo(w, now, to, func() ([][]byte, error) {
			body, err := s.a2aPush(w, rec, pc)
			return [][]byte{body}, err
		}); err != nil {
			return err
		}
	}
	return nil
}

// attemptA2A posts an A2A push notification: the StreamResponse as
// application/a2a+json, the config's authentication as Authorization, its token as
// X-A2A-Notification-Token and as the key of the Standard Webhooks signature (so a
// receiver can check that the body is the one agentplane sent, untouched).
func (s *Service) attemptA2A(ctx context.Context, rec *storagev1.OutboxRecord) result {
	pc := rec.GetA2APush()
	if pc == nil {
		return result{permanent: true, detail: "A2A push notification without a destination"}
	}
	if reason, ok := gates.CheckDestinationURL(pc.GetUrl(), s.cfg.AllowPrivateDestinations); !ok {
		return result{permanent: true, detail: "push URL refused: " + string(reason)}
	}
	body := rec.GetPayload()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pc.GetUrl(), bytesReader(body))
	if err != nil {
		return result{permanent: true, detail: "push URL: invalid"}
	}
	ts := s.now().Unix()
	req.Header.Set("Content-Type", "application/a2a+json")
	req.Header.Set("User-Agent", "agentplane-webhooks/"+version.String())
	req.Header.Set(HeaderID, rec.GetId())
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	if tok := pc.GetToken(); tok != "" {
		req.Header.Set(HeaderA2AToken, tok)
		req.Header.Set(HeaderSignature, Sign([]byte(tok), rec.GetId(), ts, body))
	}
	if scheme := pc.GetAuthScheme(); scheme != "" {
		req.Header.Set("Authorization", scheme+" "+pc.GetAuthCredentials())
	}
	return s.post(req, config.A2APushEndpoint)
}
